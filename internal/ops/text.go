package ops

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable escapes every character that could change how a terminal or a
// log shows the text around it: C0 and C1 control characters (ESC, CR, LF,
// TAB, BS...), DEL, Unicode format characters (bidirectional overrides,
// zero-width characters) and invalid UTF-8. The result is always one line.
// Lock IDs, reasons, names and error messages are printed through it, since
// another operator may have written anything into a Lease or an object.
func Printable(s string) string {
	if isPrintable(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case unsafeRune(r) && r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// CheckPrintable refuses a user-supplied value holding a character that
// Printable would escape. what names the value ("--reason", "CLUSTER");
// the value itself is not repeated, since it may be a credential.
func CheckPrintable(what, s string) error {
	if isPrintable(s) {
		return nil
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return Usagef("%s is not valid UTF-8 (byte %d)", what, i+1)
		}
		if unsafeRune(r) {
			return Usagef("%s contains the control character %U at byte %d; control and formatting characters are not allowed",
				what, r, i+1)
		}
		i += size
	}
	return nil
}

func isPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return isPrintableSlow(s)
		}
	}
	return true
}

func isPrintableSlow(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unsafeRune(r) {
			return false
		}
	}
	return true
}

// unsafeRune: control characters (C0, DEL, C1), format characters (Cf:
// bidi overrides, zero-width joiners) and line/paragraph separators.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

// ShellQuote quotes s for a POSIX shell when it needs it, so a printed
// command works when pasted.
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ReleaseCommand is the `lock release` command line that gives up the lock
// of namespace/cluster held as id, ready to paste.
func ReleaseCommand(namespace, cluster, id string) string {
	return fmt.Sprintf("kubectl dbops lock release %s -n %s --id %s", ShellQuote(cluster), ShellQuote(namespace), ShellQuote(id))
}

// PrintableArgs returns a with every string, error and []string passed
// through Printable, for fmt.Fprintf calls that render stored or
// user-supplied values: fmt.Fprintf(w, format, PrintableArgs(a...)...).
func PrintableArgs(a ...any) []any {
	out := make([]any, len(a))
	for i, v := range a {
		switch v := v.(type) {
		case string:
			out[i] = Printable(v)
		case error:
			out[i] = Printable(v.Error())
		case []string:
			out[i] = PrintableAll(v)
		default:
			out[i] = v
		}
	}
	return out
}

// PrintableAll applies Printable to each string.
func PrintableAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = Printable(s)
	}
	return out
}

// Fprintf is fmt.Fprintf with every string argument escaped (see
// PrintableArgs): human output quotes names, IDs and reasons that other
// operators wrote.
func Fprintf(w io.Writer, format string, a ...any) (int, error) {
	return fmt.Fprintf(w, format, PrintableArgs(a...)...)
}

// Printable returns a copy of e with every string escaped (see Printable),
// for the human views: an event quotes lock holders, reasons, errors and
// plan text that other operators or the cluster supplied.
func (e Event) Printable() Event {
	p := func(s *string) { *s = Printable(*s) }
	for _, s := range []*string{&e.Operation, &e.Cluster, &e.Message, &e.Reason, &e.Error, &e.Outcome, &e.Resume} {
		p(s)
	}
	if e.Step != nil {
		st := *e.Step
		p(&st.ID)
		p(&st.Target)
		p(&st.Description)
		e.Step = &st
	}
	if len(e.StepTimes) > 0 {
		e.StepTimes = slices.Clone(e.StepTimes)
		for i := range e.StepTimes {
			p(&e.StepTimes[i].Step)
			p(&e.StepTimes[i].Target)
		}
	}
	if e.Blocked != nil {
		b := *e.Blocked
		for _, s := range []*string{&b.Kind, &b.On, &b.ToUnblock, &b.Stalled} {
			p(s)
		}
		e.Blocked = &b
	}
	if e.ETA != nil {
		t := *e.ETA
		p(&t.Basis)
		p(&t.Unknown)
		if t.Step != nil {
			st := *t.Step
			p(&st.Basis)
			p(&st.Unknown)
			t.Step = &st
		}
		e.ETA = &t
	}
	if e.Progress != nil {
		pr := *e.Progress
		p(&pr.Unit)
		e.Progress = &pr
	}
	if e.Lock != nil {
		l := *e.Lock
		p(&l.Action)
		p(&l.Holder)
		p(&l.Operation)
		p(&l.Previous)
		e.Lock = &l
	}
	if e.Plan != nil {
		e.Plan = e.Plan.Printable()
	}
	if e.Pods != nil {
		pods := make([]PodSummary, len(e.Pods))
		for i, pod := range e.Pods {
			for _, s := range []*string{&pod.Name, &pod.Group, &pod.Phase, &pod.Node, &pod.Zone, &pod.UID} {
				p(s)
			}
			pods[i] = pod
		}
		e.Pods = pods
	}
	return e
}

// Printable returns a copy of v with every string escaped.
func (v *PlanView) Printable() *PlanView {
	c := *v
	for _, s := range []*string{&c.Operation, &c.Cluster, &c.Namespace, &c.Engine, &c.Args, &c.Command} {
		*s = Printable(*s)
	}
	if c.Notes != nil {
		c.Notes = PrintableAll(c.Notes)
	}
	c.Steps = make([]StepView, len(v.Steps))
	for i, st := range v.Steps {
		for _, s := range []*string{&st.ID, &st.Group, &st.Target, &st.Description} {
			*s = Printable(*s)
		}
		if st.Preconditions != nil {
			st.Preconditions = PrintableAll(st.Preconditions)
		}
		if st.Details != nil {
			st.Details = PrintableAll(st.Details)
		}
		c.Steps[i] = st
	}
	return &c
}

// JSONPrintable escapes, as \uXXXX, the characters encoding/json leaves raw
// although a terminal acts on them (DEL, C1 controls, bidirectional and
// other format characters), so NDJSON piped to a terminal or a log viewer
// cannot recolour or reorder it. encoding/json already escapes C0 controls
// and U+2028/U+2029; such characters can only occur inside JSON strings, so
// the result is the same JSON value.
func JSONPrintable(b []byte) []byte {
	clean := true
	for _, c := range b {
		if c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r >= 0x7f && r != utf8.RuneError && unsafeRune(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}

// FormatBytes renders n bytes for people: "512 B", "1.5 KiB", "3.2 GiB" (binary units, as
// kubectl's quantities and the databases' own tools print sizes).
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), -1
	for (f >= unit || f <= -unit) && i < 5 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGTPE"[i])
}
