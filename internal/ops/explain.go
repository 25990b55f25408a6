package ops

import (
	"fmt"
	"io"
	"strings"
)

// Check is one line of `explain`: a precondition of a procedure, whether it holds now, why
// (Detail) and, when it does not, the command or setting that fixes it.
type Check struct {
	// Name is short and stable: health, maintenance-zone, lock, rbac, operator, ...
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
	Fix    string `json:"fix,omitempty"`
}

// CheckErr is a check from a gate's answer: passed when err is nil, else failed with the
// refusal as its detail.
func CheckErr(name string, err error, okDetail, fix string) Check {
	if err == nil {
		return Check{Name: name, OK: true, Detail: okDetail}
	}
	return Check{Name: name, Detail: err.Error(), Fix: fix}
}

// ChecksPass reports whether every check passed.
func ChecksPass(checks []Check) bool {
	for _, c := range checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// WriteChecks prints a checklist: "[ok]" or "[FAIL]", the name and detail, and under a failed
// line the fix.
func WriteChecks(w io.Writer, checks []Check) error {
	var b strings.Builder
	for _, c := range checks {
		mark := "[ok]  "
		if !c.OK {
			mark = "[FAIL]"
		}
		fmt.Fprintf(&b, "%s %-18s %s\n", mark, c.Name, c.Detail)
		if !c.OK && c.Fix != "" {
			fmt.Fprintf(&b, "       %-18s fix: %s\n", "", c.Fix)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
