// Package poll waits for a condition with a deadline and, when the deadline
// passes, says what was awaited and what was last seen. It never sleeps blindly:
// every wait is bounded by a context and a timeout.
package poll

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultInterval between two checks.
const DefaultInterval = 100 * time.Millisecond

type stopError struct{ err error }

func (s stopError) Error() string { return s.err.Error() }
func (s stopError) Unwrap() error { return s.err }

// Stop wraps err so that Until returns it at once instead of retrying.
func Stop(err error) error { return stopError{err} }

// TimeoutError is returned when the deadline passes.
type TimeoutError struct {
	What    string
	Timeout time.Duration
	Last    error
	// Why, when set, says which bound ended the wait (UntilIdle).
	Why string
}

func (e *TimeoutError) Error() string {
	s := fmt.Sprintf("timed out after %s waiting for %s", e.Timeout, e.What)
	if e.Why != "" {
		s += " (" + e.Why + ")"
	}
	if e.Last != nil {
		s += fmt.Sprintf("; last seen: %v", e.Last)
	}
	return s
}

// UntilIdle is Until for a wait that lasts while something else progresses:
// it gives up once idle has passed with no progress — neither since the
// wait began nor since the latest time progress returns — or once max has
// passed in all. A busy system is given time; a stalled one is not.
func UntilIdle(ctx context.Context, idle, max time.Duration, what string, progress func() time.Time, check func(context.Context) error) error {
	quiet := func(start time.Time) string {
		since := start
		if p := progress(); p.After(since) {
			since = p
		}
		if time.Since(since) <= idle {
			return ""
		}
		why := fmt.Sprintf("nothing progressed for %s", idle)
		if since.After(start) {
			why += fmt.Sprintf("; the last progress was %s after the wait began", since.Sub(start).Round(time.Millisecond))
		}
		return why
	}
	return loop(ctx, max, DefaultInterval, what, check, quiet, fmt.Sprintf("the longest wait, %s, passed while other work progressed", max))
}

func (e *TimeoutError) Unwrap() error { return e.Last }

// Until calls check until it returns nil, returns an error wrapped with Stop,
// the timeout passes or ctx ends. A non-nil, non-Stop error from check is the
// "last seen" state reported on timeout. what names the awaited state.
func Until(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error) error {
	return UntilEvery(ctx, timeout, DefaultInterval, what, check)
}

// UntilEvery is Until with an explicit interval.
func UntilEvery(ctx context.Context, timeout, interval time.Duration, what string, check func(context.Context) error) error {
	return loop(ctx, timeout, interval, what, check, nil, "")
}

// loop calls check every interval until it passes, returns an error
// wrapped with Stop, ctx ends, max has passed since the start (a
// TimeoutError saying maxWhy) or expired, when set, gives a reason to give
// up (a TimeoutError saying it).
func loop(ctx context.Context, max, interval time.Duration, what string, check func(context.Context) error, expired func(start time.Time) string, maxWhy string) error {
	if interval <= 0 {
		interval = DefaultInterval
	}
	start := time.Now()
	ctx, cancel := context.WithDeadline(ctx, start.Add(max))
	defer cancel()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var last error
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		var stop stopError
		if errors.As(err, &stop) {
			return stop.err
		}
		// An error caused by our own deadline says nothing about the state.
		if ctx.Err() == nil || last == nil {
			last = err
		}
		if expired != nil {
			if why := expired(start); why != "" {
				return &TimeoutError{What: what, Timeout: time.Since(start).Round(time.Millisecond), Last: last, Why: why}
			}
		}
		select {
		case <-ctx.Done():
			if time.Since(start) < max {
				// The caller's context ended, not our deadline.
				return fmt.Errorf("stopped waiting for %s: %w (last seen: %v)", what, context.Cause(ctx), last)
			}
			return &TimeoutError{What: what, Timeout: max, Last: last, Why: maxWhy}
		case <-ticker.C:
		}
	}
}
