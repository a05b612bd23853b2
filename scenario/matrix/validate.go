package matrix

import (
	"bytes"
	_ "embed"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed schema.json
var schemaJSON []byte

// SchemaJSON returns schema.json: the JSON Schema (2020-12) of JSONFile.
func SchemaJSON() []byte { return bytes.Clone(schemaJSON) }

// Validate checks a matrix.json document against SchemaJSON() (formats
// asserted).
func Validate(doc []byte) error {
	sch, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return fmt.Errorf("matrix: schema.json: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	const loc = "schema.json"
	if err := c.AddResource(loc, sch); err != nil {
		return fmt.Errorf("matrix: schema.json: %w", err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return fmt.Errorf("matrix: schema.json: %w", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("matrix: %s: %w", JSONFile, err)
	}
	if err := s.Validate(inst); err != nil {
		return fmt.Errorf("matrix: %s: %w", JSONFile, err)
	}
	return nil
}
