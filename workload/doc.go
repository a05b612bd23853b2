// Package workload generates the job objects a MultiKueue test submits to the
// manager, in the builder style of Kueue's pkg/util/testing:
//
//	job := workload.NewJob("sample", "default").Queue("user-queue").
//		Requests("1", "1Gi").RunFor(2 * time.Second).Obj()
//
// Builders only build objects; submitting them is the caller's (or a
// scenario's) business.
package workload
