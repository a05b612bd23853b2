// Package workload generates the job objects a MultiKueue test submits to the
// manager, in the builder style of Kueue's pkg/util/testing:
//
//	job := workload.NewJob("sample", "default").Queue("user-queue").
//		Requests("1", "1Gi").RunFor(2 * time.Second).Obj()
//
// A built Job or JobSet runs the same on the local topology and on a real
// cluster: RunFor and Fails set both the annotations the local topology's
// KWOK Stage reads on the pods and a pod template (DefaultImage, a busybox, or Image) that sleeps for the
// run duration and exits 0 or 1, with no restarts and backoffLimit 0. A
// built RayJob's entrypoint sleeps and exits the same way (NewRayJob); a
// RayCluster (NewRayCluster) runs until it is deleted.
//
// Builders only build objects; submitting them is the caller's (or a
// scenario's) business.
package workload
