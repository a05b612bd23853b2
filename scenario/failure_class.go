package scenario

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/multikueue-testkit/testkit/assert"
)

// FailureClass says what a failed run failed on.
type FailureClass string

const (
	// ClassInfrastructure: the test bed failed, not MultiKueue: a cluster did
	// not start, an API server could not be reached or timed out.
	ClassInfrastructure FailureClass = "infrastructure"
	// ClassBehaviour: a MultiKueue behaviour did not hold (an assertion).
	ClassBehaviour FailureClass = "behaviour"
	// ClassOther: neither could be told (bad options, for instance).
	ClassOther FailureClass = "other"
)

// InfraError is a failure of the test bed rather than of MultiKueue: a
// cluster that did not start, an API server that could not be reached.
// Callers tell it with errors.As.
type InfraError struct {
	// Cluster concerned; empty when the whole topology is.
	Cluster string
	// Op is what was being done: "start the topology", "create Job default/a".
	Op  string
	Err error
}

func (e *InfraError) Error() string {
	if e.Cluster != "" {
		return fmt.Sprintf("infrastructure: cluster %q: %s: %v", e.Cluster, e.Op, e.Err)
	}
	return fmt.Sprintf("infrastructure: %s: %v", e.Op, e.Err)
}

func (e *InfraError) Unwrap() error { return e.Err }

// BehaviourError is a MultiKueue behaviour that did not hold: it wraps the
// assertions' failures (*assert.Failure, reachable with errors.As too).
type BehaviourError struct {
	// Scenario or gate that judged it ("smoke", "load").
	Scenario string
	Err      error
}

func (e *BehaviourError) Error() string {
	return fmt.Sprintf("MultiKueue behaviour (%s): %v", e.Scenario, e.Err)
}

func (e *BehaviourError) Unwrap() error { return e.Err }

// Classify tells what err failed on. An InfraError, an error reaching an
// API server (a network error, a refused connection, a server timeout, a
// 5xx or 429 answer) anywhere in err's tree makes it ClassInfrastructure,
// even alongside assertion failures (a broken test bed makes assertions
// fail too); otherwise a BehaviourError or an *assert.Failure makes it
// ClassBehaviour; anything else is ClassOther. nil is "".
func Classify(err error) FailureClass {
	if err == nil {
		return ""
	}
	if isInfra(err) {
		return ClassInfrastructure
	}
	var be *BehaviourError
	var f *assert.Failure
	if errors.As(err, &be) || errors.As(err, &f) {
		return ClassBehaviour
	}
	return ClassOther
}

func isInfra(err error) bool {
	var ie *InfraError
	// client-go wraps every transport failure (refused, reset, timed out)
	// in a *url.Error. A bare context deadline is not counted: it is the
	// caller's budget, not the test bed.
	var ue *url.Error
	var oe *net.OpError
	if errors.As(err, &ie) || errors.As(err, &ue) || errors.As(err, &oe) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		code := st.Status().Code
		return code >= 500 || code == 429 || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
	}
	return false
}
