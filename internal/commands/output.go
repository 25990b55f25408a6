package commands

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// writeStructured prints v as indented JSON or YAML. Characters a terminal
// acts on are escaped in both (ops.JSONPrintable; YAML gets every such
// string through ops.Printable, since it refuses some of them outright).
func writeStructured(w io.Writer, v any, format string) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding JSON: %w", err)
	}
	if format == "yaml" {
		// Numbers stay json.Number: a float64 would print large ones
		// (nanosecond durations) in exponent form.
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var generic any
		if err := dec.Decode(&generic); err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		y, err := yaml.Marshal(printableValue(generic))
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		_, err = w.Write(y)
		return err
	}
	_, err = fmt.Fprintln(w, string(ops.JSONPrintable(b)))
	return err
}

// printableValue escapes every string (keys too) of a decoded JSON value.
func printableValue(v any) any {
	switch v := v.(type) {
	case string:
		return ops.Printable(v)
	case []any:
		for i := range v {
			v[i] = printableValue(v[i])
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, val := range v {
			out[ops.Printable(k)] = printableValue(val)
		}
		return out
	default:
		return v
	}
}
