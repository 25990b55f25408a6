// Command e2esummary reads `go test -json` on stdin and prints what a plain `go test` run
// prints — each package's closing line (ok / FAIL / ---) and the whole output of every test
// that failed — and then one summary line per run: how many tests ran, passed, failed and were
// skipped, with each skip's reason, so that a green `make e2e` says what it did not run, and
// the slowest tests.
// It also echoes the lines a test marks for the log of every run (the kill matrix's seed and
// retries). It exits 1 when a test or package failed or the input was not test2json, else 0.
//
// With -label unit it names the summary line "unit summary" (make unit pipes its tests through
// it too, so that a package that hangs names the tests that did not finish on its last lines).
//
//	go test -json -tags e2e ./test/e2e/... | go run ./hack/e2esummary
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64 // seconds, on a test's pass/fail/skip
}

// slowestShown is how many of the slowest tests the summary names: where the package's time
// goes, for the next trim of its -timeout budget.
const slowestShown = 10

type timing struct {
	test string
	secs float64
}

// alwaysShown reports whether a line of test output is printed even when the test passed:
// the kill matrix's seed and its retries.
func alwaysShown(o string) bool {
	return strings.Contains(o, "kill matrix: seed") || strings.Contains(o, "RETRY ")
}

type testKey struct{ pkg, test string }

type summary struct {
	ran, passed, failed int
	skipped             map[string][]string // reason -> tests
	pkgFailed           bool
	times               []timing
}

func main() {
	label := flag.String("label", "e2e", "the summary line's first word")
	flag.Parse()
	ok, err := run(os.Stdin, os.Stdout, *label)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2esummary:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// run copies the interesting output of in to out and returns whether everything passed.
func run(in io.Reader, out io.Writer, label string) (bool, error) {
	s := summary{skipped: map[string][]string{}}
	outputs := map[testKey][]string{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	lines := 0
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not test2json (a build error printed as text, say): pass it on.
			fmt.Fprintln(out, string(line))
			continue
		}
		lines++
		k := testKey{e.Package, e.Test}
		switch e.Action {
		case "build-output":
			fmt.Fprint(out, e.Output)
		case "build-fail":
			s.pkgFailed = true
		case "output":
			if e.Test == "" {
				// Package level: go test's own closing lines (ok, FAIL, ---) and what the
				// test binary printed outside any test.
				if o := e.Output; !strings.HasPrefix(o, "=== ") && o != "PASS\n" && o != "testing: warning: no tests to run\n" {
					fmt.Fprint(out, o)
				}
				continue
			}
			outputs[k] = append(outputs[k], e.Output)
			if alwaysShown(e.Output) {
				fmt.Fprintf(out, "%s: %s", e.Test, strings.TrimLeft(e.Output, " "))
			}
		case "pass", "fail", "skip":
			if e.Test == "" {
				if e.Action == "fail" {
					s.pkgFailed = true
				}
				continue
			}
			if strings.Contains(e.Test, "/") {
				// Subtests are counted with their parent; a failing one's output is part of it.
				if e.Action == "fail" {
					outputs[testKey{e.Package, parent(e.Test)}] = append(outputs[testKey{e.Package, parent(e.Test)}], outputs[k]...)
				}
				delete(outputs, k)
				continue
			}
			if e.Action != "skip" {
				s.times = append(s.times, timing{e.Test, e.Elapsed})
			}
			switch e.Action {
			case "pass":
				s.ran++
				s.passed++
			case "fail":
				s.ran++
				s.failed++
				for _, o := range outputs[k] {
					fmt.Fprint(out, o)
				}
			case "skip":
				r := skipReason(outputs[k])
				s.skipped[r] = append(s.skipped[r], e.Test)
			}
			delete(outputs, k)
		}
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	if lines == 0 {
		return false, fmt.Errorf("no go test -json events on stdin")
	}
	// A test with no result: the binary died under it (a panic, go test's -timeout).
	unfinished := make([]testKey, 0, len(outputs))
	for k := range outputs {
		if !strings.Contains(k.test, "/") {
			unfinished = append(unfinished, k)
		}
	}
	sort.Slice(unfinished, func(i, j int) bool { return unfinished[i].test < unfinished[j].test })
	for _, k := range unfinished {
		s.ran++
		s.failed++
		fmt.Fprintf(out, "--- %s (%s) did not finish; its output:\n", k.test, k.pkg)
		for _, o := range outputs[k] {
			fmt.Fprint(out, o)
		}
	}
	skipped := 0
	for _, ts := range s.skipped {
		skipped += len(ts)
	}
	fmt.Fprintf(out, "%s summary: %d tests ran (%d passed, %d failed), %d skipped\n", label, s.ran, s.passed, s.failed, skipped)
	reasons := make([]string, 0, len(s.skipped))
	for r := range s.skipped {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		ts := s.skipped[r]
		sort.Strings(ts)
		fmt.Fprintf(out, "  skipped %d: %s (%s)\n", len(ts), r, strings.Join(ts, ", "))
	}
	if len(s.times) > 0 {
		sort.SliceStable(s.times, func(i, j int) bool { return s.times[i].secs > s.times[j].secs })
		var total float64
		for _, t := range s.times {
			total += t.secs
		}
		var top []string
		for _, t := range s.times[:min(slowestShown, len(s.times))] {
			top = append(top, fmt.Sprintf("%s %.0fs", t.test, t.secs))
		}
		fmt.Fprintf(out, "  slowest of %.0fs: %s\n", total, strings.Join(top, ", "))
	}
	// Last, so that a log's tail names them: a hung test's goroutine dump is long.
	for _, k := range unfinished {
		fmt.Fprintf(out, "  did not finish: %s (%s)\n", k.test, k.pkg)
	}
	return s.failed == 0 && !s.pkgFailed, nil
}

func parent(test string) string {
	p, _, _ := strings.Cut(test, "/")
	return p
}

// skipReason is the message a skipped test logged last ("file_test.go:12: reason"), without
// the file and line.
func skipReason(outs []string) string {
	for i := len(outs) - 1; i >= 0; i-- {
		o := strings.TrimSpace(outs[i])
		if o == "" || strings.HasPrefix(o, "=== ") || strings.HasPrefix(o, "--- ") {
			continue
		}
		if _, msg, ok := strings.Cut(o, ": "); ok && strings.Contains(o[:len(o)-len(msg)], "_test.go:") {
			return msg
		}
		return o
	}
	return "no reason given"
}
