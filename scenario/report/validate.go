package report

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Validator checks records against schema.json (JSON Schema 2020-12,
// formats asserted).
type Validator struct {
	sch *jsonschema.Schema
}

// NewValidator compiles the embedded schema.
func NewValidator() (*Validator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, fmt.Errorf("report: schema.json: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	const loc = "schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("report: schema.json: %w", err)
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("report: schema.json: %w", err)
	}
	return &Validator{sch: sch}, nil
}

// Line validates one JSON record.
func (v *Validator) Line(line []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	if err != nil {
		return err
	}
	return v.sch.Validate(inst)
}

// Reader validates every line of r (JSON lines) and returns how many it
// read; an error names the line.
func (v *Validator) Reader(name string, r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	n := 0
	var errs []error
	for sc.Scan() {
		n++
		if err := v.Line(sc.Bytes()); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", name, n, err))
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", name, err))
	}
	return n, errors.Join(errs...)
}

// File validates every line of the JSONL file at path.
func (v *Validator) File(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return v.Reader(path, f)
}
