package ops

import (
	"fmt"
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
