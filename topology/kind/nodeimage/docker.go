package nodeimage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/multikueue-testkit/testkit/internal/redact"
)

// docker runs the docker CLI, as kind does.
type docker struct {
	bin string
}

// run runs `docker args...` with stdin (nil: none) and returns stdout; the
// error names the command and carries the tail of stderr.
func (d docker) run(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, d.bin, args...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("`docker %s`: %v: %s", short(args), err, redact.String(tail(stderr.String())))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// stream runs `docker args...` with stdout going to w.
func (d docker) stream(ctx context.Context, w io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, d.bin, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("`docker %s`: %v: %s", short(args), err, redact.String(tail(stderr.String())))
	}
	return nil
}

// imageID is the ID of ref in the local images, "" when absent.
func (d docker) imageID(ctx context.Context, ref string) string {
	id, err := d.run(ctx, nil, "image", "inspect", "--format", "{{.Id}}", ref)
	if err != nil {
		return ""
	}
	return id
}

// label is the value of an image's label, "" when the image or the label
// is absent.
func (d docker) label(ctx context.Context, ref, key string) string {
	v, err := d.run(ctx, nil, "image", "inspect", "--format", "{{index .Config.Labels \""+key+"\"}}", ref)
	if err != nil || v == "<no value>" {
		return ""
	}
	return v
}

// short is a command line for an error: long arguments cut.
func short(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if len(a) > 80 {
			a = a[:77] + "..."
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 1500 {
		s = "..." + s[len(s)-1500:]
	}
	return s
}
