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
