package local

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
)

// The KWOK controller's identity and files in the cluster directory.
const (
	// kwokUser is the KWOK controller's client identity: the kubelet's part
	// (Node status, pod status) in timelines.
	kwokUser       = "kwok-controller"
	kwokKubeconfig = "kwok.kubeconfig"
	kwokStages     = "kwok-stages.yaml"
	kwokLog        = "kwok.log"
	kwokWorkDir    = "kwok"
)

// kwokModuleStages are the Stages of the KWOK module this topology runs,
// relative to its source: Nodes become Ready at once, bound pods Running at
// once, deleted pods go at once. A Job's pods (and a Kubeflow training job's)
// end by podRunStage instead of KWOK's pod-complete.
var kwokModuleStages = []string{
	"kustomize/stage/node/fast/node-initialize.yaml",
	"kustomize/stage/pod/fast/pod-ready.yaml",
	"kustomize/stage/pod/fast/pod-delete.yaml",
}

// podRunStage ends a running pod of a Job, of a Kubeflow training job
// (the training-operator owns its pods directly), or a pod of no owner
// that runs to completion (restartPolicy Never or OnFailure: a plain Pod, a
// pod group's, from Kueue's pod integration; serving pods have owners and
// restartPolicy Always, and run on), after its run duration
// (topology.AnnotationRunDuration on the pod, default 1 s), Succeeded with
// exit code 0, or Failed with exit code 1 when its
// topology.AnnotationOutcome is Failed: the library's run annotations read
// by KWOK, in the shape of KWOK's own pod-complete Stage.
//
//go:embed kwok_pod_run.yaml
var podRunStage []byte

// writeKWOKStages writes the Stages file the KWOK controller reads, from
// the KWOK module's source at src and podRunStage.
func writeKWOKStages(path, src string) error {
	var b bytes.Buffer
	for _, rel := range kwokModuleStages {
		raw, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			return fmt.Errorf("KWOK's Stage %s: %w", rel, err)
		}
		b.Write(raw)
		b.WriteString("\n---\n")
	}
	b.Write(podRunStage)
	return os.WriteFile(path, b.Bytes(), 0o600)
}

// startKWOK starts the cluster's KWOK controller for the Nodes annotated
// kwokNodeAnnotation=fake: no Node leases (nothing here expires Nodes), no
// server port, its work directory below the cluster's (not ~/.kwok). It
// has no health endpoint without a port: createNodes waits until it made
// the Nodes Ready.
func (cp *controlPlane) startKWOK(path, src string) (*process, error) {
	if err := cp.writeClientKubeconfig(cp.file(kwokKubeconfig), kwokUser, cp.kwokID); err != nil {
		return nil, fmt.Errorf("cluster %q: KWOK kubeconfig: %w", cp.cluster, err)
	}
	if err := writeKWOKStages(cp.file(kwokStages), src); err != nil {
		return nil, fmt.Errorf("cluster %q: %w", cp.cluster, err)
	}
	work := cp.file(kwokWorkDir)
	if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, err
	}
	p := &process{
		name: "kwok", cluster: cp.cluster, path: path, logPath: cp.file(kwokLog), dir: work,
		args: []string{
			"--kubeconfig=" + cp.file(kwokKubeconfig),
			"--config=" + cp.file(kwokStages),
			"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
			"--node-lease-duration-seconds=0",
		},
		env: []string{"KWOK_WORKDIR=" + work, "HOME=" + work},
	}
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}
