// Package syncwriter serialises writes to one io.Writer from several
// goroutines (clusters made in parallel, matrix targets run at once), so
// that lines do not interleave.
package syncwriter

import (
	"io"
	"sync"
)

// Writer writes to W one Write at a time.
type Writer struct {
	mu sync.Mutex
	W  io.Writer
}

// New returns a Writer around w.
func New(w io.Writer) *Writer { return &Writer{W: w} }

func (s *Writer) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.W.Write(b)
}
