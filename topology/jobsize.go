package topology

// JobSize is what one pod of a test job requests when the test says
// nothing: a local topology's KWOK Nodes and quotas fit the default, a kind
// node (2 CPUs on a small machine, 1.35 of them taken by the control plane
// and Kueue) fits a tenth of it. A provider suggests its own
// (JobSizeSuggester); Topology.JobSize is what the scenarios and the
// examples use where the caller gave no size of its own.
type JobSize struct {
	// CPU and Memory are resource quantities ("1", "100m"; "1Gi", "64Mi").
	CPU, Memory string
}

// The local topology's job size, used where the provider suggests none.
const (
	DefaultJobCPU    = "1"
	DefaultJobMemory = "1Gi"
)

// JobSizeSuggester is a Provider whose nodes fit a smaller (or larger) job
// than the default (DefaultJobCPU, DefaultJobMemory): kind's, whose nodes are containers on the test host.
type JobSizeSuggester interface {
	SuggestedJobSize() JobSize
}

// JobSize returns the provider's suggestion (JobSizeSuggester), field by
// field, else DefaultJobCPU and DefaultJobMemory.
func (t *Topology) JobSize() JobSize {
	s := JobSize{CPU: DefaultJobCPU, Memory: DefaultJobMemory}
	if p, ok := t.provider.(JobSizeSuggester); ok {
		got := p.SuggestedJobSize()
		if got.CPU != "" {
			s.CPU = got.CPU
		}
		if got.Memory != "" {
			s.Memory = got.Memory
		}
	}
	return s
}
