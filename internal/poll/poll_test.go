package poll

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestUntilSucceeds(t *testing.T) {
	n := 0
	err := UntilEvery(context.Background(), time.Second, time.Millisecond, "three calls", func(context.Context) error {
		n++
		if n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("err=%v n=%d", err, n)
	}
}

func TestUntilTimeoutSaysWhatAndLast(t *testing.T) {
	err := UntilEvery(context.Background(), 30*time.Millisecond, time.Millisecond, "the widget to be Ready", func(context.Context) error {
		return errors.New("widget is Pending")
	})
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("want TimeoutError, got %v", err)
	}
	for _, want := range []string{"the widget to be Ready", "widget is Pending", "timed out after 30ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestUntilStop(t *testing.T) {
	boom := errors.New("boom")
	err := Until(context.Background(), time.Second, "x", func(context.Context) error { return Stop(boom) })
	if !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
}

func TestUntilCallerCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Until(ctx, time.Hour, "forever", func(context.Context) error { return errors.New("no") })
	if err == nil || !strings.Contains(err.Error(), "stopped waiting for forever") {
		t.Fatalf("got %v", err)
	}
}

// UntilIdle waits past idle while progress moves, gives up after idle of
// none, and never past max.
func TestUntilIdle(t *testing.T) {
	ctx := context.Background()
	notYet := func(context.Context) error { return errors.New("not yet") }
	// Busy: progress moves every call; the check passes after 400ms, well
	// past the 200ms idle bound.
	start := time.Now()
	err := UntilIdle(ctx, 200*time.Millisecond, 5*time.Second, "the busy one", time.Now, func(context.Context) error {
		if time.Since(start) < 400*time.Millisecond {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("busy: %v", err)
	}
	// Stalled: no progress at all.
	err = UntilIdle(ctx, 200*time.Millisecond, 5*time.Second, "the stalled one", func() time.Time { return time.Time{} }, notYet)
	var te *TimeoutError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "nothing progressed for 200ms") || !strings.Contains(err.Error(), "not yet") {
		t.Fatalf("stalled: %v", err)
	}
	// Busy for ever: max ends it.
	err = UntilIdle(ctx, 200*time.Millisecond, 500*time.Millisecond, "the starved one", time.Now, notYet)
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "the longest wait, 500ms, passed while other work progressed") {
		t.Fatalf("starved: %v", err)
	}
}
