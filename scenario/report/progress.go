package report

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// progress renders a scale run's progress: phase lines, and a bar with
// the share of work done and an estimate of the time left. Work units: a
// run's start counts one per cluster, its smoke gate one, its load one per
// job. On a terminal the bar redraws in place; elsewhere a line is printed
// every 10 %.
type progress struct {
	w     io.Writer
	tty   bool
	start time.Time

	mu       sync.Mutex
	total    int
	done     int
	lastTens int
}

func newProgress(w io.Writer, total int) *progress {
	if w == nil {
		w = io.Discard
	}
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progress{w: w, tty: tty, start: time.Now(), total: max(total, 1), lastTens: -1}
}

// phase prints one line (clearing the bar on a terminal).
func (p *progress) phase(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, "mktk: "+format+"\n", args...)
	p.render()
}

// add counts n units done.
func (p *progress) add(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = min(p.done+n, p.total)
	p.render()
}

func (p *progress) render() {
	frac := float64(p.done) / float64(p.total)
	tens := int(frac * 10)
	if !p.tty && tens == p.lastTens {
		return
	}
	p.lastTens = tens
	const width = 30
	n := int(frac * width)
	eta := "?"
	if p.done > 0 {
		el := time.Since(p.start)
		eta = (time.Duration(float64(el)/frac) - el).Round(time.Second).String()
	}
	bar := fmt.Sprintf("[%s%s] %3.0f%% %d/%d units, elapsed %s, ETA %s", strings.Repeat("#", n), strings.Repeat(".", width-n),
		frac*100, p.done, p.total, time.Since(p.start).Round(time.Second), eta)
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K"+bar)
		if p.done == p.total {
			fmt.Fprintln(p.w)
		}
		return
	}
	fmt.Fprintln(p.w, "mktk: "+bar)
}
