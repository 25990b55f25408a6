package commands

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// annotationDocument marks the commands that print one document (status,
// lock, deny, version): they take every -o format of cli-runtime's
// PrintFlags. The other commands stream (text or NDJSON) and take
// outputFormats only.
const annotationDocument = "dbops.io/document-output"

// documentAnnotations is the cobra annotation map of a document command.
func documentAnnotations() map[string]string { return map[string]string{annotationDocument: "true"} }

// newPrintFlags returns cli-runtime's printer flags for one -o value.
func newPrintFlags(format string) *genericclioptions.PrintFlags {
	pf := genericclioptions.NewPrintFlags("")
	pf.OutputFormat = &format
	return pf
}

// documentFormats lists the -o values of document commands, for messages
// and completion.
func documentFormats() []string {
	out := []string{"text"}
	for _, f := range newPrintFlags("").AllowedFormats() {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// validateOutput checks -o without touching the API: document commands take
// PrintFlags' formats (a bad template is refused here too), the others
// outputFormats.
func (o *GlobalOptions) validateOutput() error {
	if slices.Contains(outputFormats, o.Output) {
		return nil
	}
	_, err := newPrintFlags(o.Output).ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		allowed := outputFormats
		if o.documentOutput {
			allowed = documentFormats()
		}
		return ops.Usagef("unknown output format %q; allowed: %s", o.Output, strings.Join(allowed, ", "))
	}
	if !o.documentOutput {
		return ops.Usagef("-o %s is for commands that print a document (status, lock, deny, version); operations take -o text or json (yaml: --dry-run plans)", o.Output)
	}
	if err != nil {
		return ops.Usagef("-o %s: %v", o.Output, err)
	}
	return nil
}

// document turns v (a JSON-encodable value) into the object the printers
// print: apiVersion dbops.io/v1alpha1, kind, and metadata naming the cluster
// it is about, so -o name and templates work as with kubectl.
func document(v any, kind, name, namespace string) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", kind, err)
	}
	content := map[string]any{}
	// apimachinery's decoder keeps integers int64 (a float64 would print
	// nanosecond durations in exponent form).
	if err := utiljson.Unmarshal(b, &content); err != nil {
		return nil, fmt.Errorf("encoding %s: %w", kind, err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetAPIVersion(StatusAPIVersion)
	u.SetKind(kind)
	if name != "" {
		u.SetName(name)
		u.SetNamespace(namespace)
	}
	return u, nil
}

// documentList is document for a list: each item gets itemKind and its
// name from nameOf.
func documentList[T any](items []T, kind, itemKind, cluster, namespace string, nameOf func(T) string) (*unstructured.UnstructuredList, error) {
	list := &unstructured.UnstructuredList{Object: map[string]any{}}
	list.SetAPIVersion(StatusAPIVersion)
	list.SetKind(kind)
	// A list has no object metadata; it says which cluster it is about.
	list.Object["cluster"], list.Object["namespace"] = cluster, namespace
	list.Items = []unstructured.Unstructured{}
	for _, it := range items {
		u, err := document(it, itemKind, nameOf(it), namespace)
		if err != nil {
			return nil, err
		}
		list.Items = append(list.Items, *u)
	}
	return list, nil
}

// printDocument prints obj with the -o printer, or calls text for -o text.
// Characters a terminal acts on are escaped in every format: JSON (also
// jsonpath-as-json) as \uXXXX after encoding (ops.JSONPrintable), every other
// format gets each string (keys too) through ops.Printable first.
func (o *GlobalOptions) printDocument(w io.Writer, obj runtime.Object, text func(io.Writer) error) error {
	if o.Output == "" || o.Output == "text" {
		return text(w)
	}
	p, err := newPrintFlags(o.Output).ToPrinter()
	if err != nil {
		return ops.Usagef("-o %s: %v", o.Output, err)
	}
	if o.Output == "json" || strings.HasPrefix(o.Output, "jsonpath-as-json") {
		var b bytes.Buffer
		if err := p.PrintObj(obj, &b); err != nil {
			return fmt.Errorf("printing JSON: %w", err)
		}
		_, err := w.Write(ops.JSONPrintable(b.Bytes()))
		return err
	}
	switch u := obj.(type) {
	case *unstructured.Unstructured:
		u.Object = printableValue(u.Object).(map[string]any)
	case *unstructured.UnstructuredList:
		u.Object = printableValue(u.Object).(map[string]any)
		for i := range u.Items {
			u.Items[i].Object = printableValue(u.Items[i].Object).(map[string]any)
		}
	}
	if err := p.PrintObj(obj, w); err != nil {
		return fmt.Errorf("printing -o %s: %w", o.Output, err)
	}
	return nil
}

// writeStructured prints v as indented JSON or YAML. Characters a terminal
// acts on are escaped in both (ops.JSONPrintable; YAML gets every such
// string through ops.Printable, since it refuses some of them outright).
// Plans use it; documents go through printDocument.
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

// dryRunValue is --dry-run as kubectl takes it: client (also bare
// --dry-run, and true from DBOPS_DRY_RUN or the config file) or none;
// server is refused, since plans are computed here from live state.
type dryRunValue struct{ on *bool }

func (d dryRunValue) String() string {
	if *d.on {
		return "client"
	}
	return "none"
}

func (d dryRunValue) Set(s string) error {
	if err := ops.CheckPrintable("--dry-run", s); err != nil {
		return err
	}
	switch s {
	case "client", "true":
		*d.on = true
	case "none", "false":
		*d.on = false
	case "server":
		return fmt.Errorf("server is not supported: kubectl-dbops computes the plan from live state and sends nothing; use --dry-run=client")
	default:
		return fmt.Errorf(`must be "none" or "client" ("server" is not supported)`)
	}
	return nil
}

func (d dryRunValue) Type() string { return "string" }

// warnUnknownConfigKeys names each config file key that is no flag of any
// command (a typo such as lock_id or lockid would otherwise be ignored
// without a word). Keys of other commands' flags are valid: one file serves
// every command.
func warnUnknownConfigKeys(w io.Writer, path string, keys []string, root *cobra.Command) {
	known := map[string]bool{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.PersistentFlags(), c.LocalFlags()} {
			fs.VisitAll(func(f *pflag.Flag) { known[f.Name] = true })
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	slices.Sort(keys)
	for _, k := range keys {
		if !known[k] {
			ops.Fprintf(w, "WARNING: config file %s: unknown key %q (not a kubectl-dbops flag); ignored\n", path, k)
		}
	}
}
