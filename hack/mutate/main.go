// Command mutate is the mutation check of kubectl-dbops' safety checks: for each mutant of
// mutants.txt (a safety check disabled) it runs the listed tests of the listed package with
// the mutated file swapped in by `go test -overlay`, so the work tree is never modified and
// other builds may run meanwhile, and requires them to fail ("killed"). A mutant whose tests
// pass ("survived") or that does not apply or compile ("error": the list is stale) fails the
// run. The kill rate is printed at the end.
//
//	go run ./hack/mutate                 every mutant (make mutate)
//	go run ./hack/mutate -sample 6       6 mutants drawn with a printed seed (make test)
//	go run ./hack/mutate -seed N -sample 6    the same draw again
//	go run ./hack/mutate -only 'fdb-restart-'  the mutants whose id matches
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	list := flag.String("list", "hack/mutate/mutants.txt", "the list of mutants")
	sample := flag.Int("sample", 0, "run this many mutants drawn at random (0: all)")
	seed := flag.Uint64("seed", 0, "the sample's seed (0: a new one, printed)")
	only := flag.String("only", "", "run only the mutants whose id matches this regular expression")
	timeout := flag.Duration("timeout", 5*time.Minute, "go test -timeout of each mutant's run")
	flag.Parse()
	if err := run(*list, *sample, *seed, *only, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

func run(list string, sample int, seed uint64, only string, timeout time.Duration) error {
	mutants, err := Load(list)
	if err != nil {
		return err
	}
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			return fmt.Errorf("-only: %w", err)
		}
		mutants = slices.DeleteFunc(mutants, func(m Mutant) bool { return !re.MatchString(m.ID) })
	}
	if sample > 0 && sample < len(mutants) {
		if seed == 0 {
			seed = uint64(time.Now().UnixNano())
		}
		again := fmt.Sprintf("-sample %d -seed %d", sample, seed)
		if only != "" {
			again += fmt.Sprintf(" -only '%s'", only)
		}
		fmt.Printf("mutate: %d of %d mutants, seed %d (again: go run ./hack/mutate %s; all: make mutate)\n",
			sample, len(mutants), seed, again)
		r := rand.New(rand.NewPCG(seed, seed))
		r.Shuffle(len(mutants), func(i, j int) { mutants[i], mutants[j] = mutants[j], mutants[i] })
		mutants = mutants[:sample]
	} else {
		fmt.Printf("mutate: all %d mutants\n", len(mutants))
	}
	if len(mutants) == 0 {
		return errors.New("no mutant selected")
	}
	tmp, err := os.MkdirTemp("", "mutate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	// The unmutated tests must pass first, or a "kill" proves nothing.
	type suite struct{ pkg, run string }
	var suites []suite
	for _, m := range mutants {
		if s := (suite{m.Pkg, m.Run}); !slices.Contains(suites, s) {
			suites = append(suites, s)
		}
	}
	for _, s := range suites {
		out, err := goTest(s.pkg, s.run, "", timeout)
		if err != nil {
			return fmt.Errorf("the unmutated tests fail (go test %s -run '%s'); fix them first:\n%s", s.pkg, s.run, tail(out))
		}
	}

	var killed, survived, broken []string
	for i, m := range mutants {
		start := time.Now()
		verdict, detail := runMutant(m, tmp, i, timeout)
		fmt.Printf("%-9s %-48s %s %s\n", verdict, m.ID, time.Since(start).Round(time.Second), detail)
		switch verdict {
		case "killed":
			killed = append(killed, m.ID)
		case "SURVIVED":
			survived = append(survived, m.ID)
		default:
			broken = append(broken, m.ID)
		}
	}
	valid := len(killed) + len(survived)
	rate := 0.0
	if valid > 0 {
		rate = 100 * float64(len(killed)) / float64(valid)
	}
	fmt.Printf("mutate: kill rate %.0f %% (%d of %d killed), %d survived, %d error(s) in the list\n",
		rate, len(killed), valid, len(survived), len(broken))
	if len(survived) > 0 || len(broken) > 0 {
		return fmt.Errorf("survived: %s; errors: %s (a survivor needs a test that fails without its check; an error needs its entry in %s fixed)",
			dashJoin(survived), dashJoin(broken), "hack/mutate/mutants.txt")
	}
	return nil
}

// runMutant applies m through an overlay and runs its tests: "killed" (they fail),
// "SURVIVED" (they pass) or "ERROR" (m does not apply, or the mutated code does not build).
func runMutant(m Mutant, tmp string, i int, timeout time.Duration) (verdict, detail string) {
	src, err := os.ReadFile(m.File)
	if err != nil {
		return "ERROR", err.Error()
	}
	mutated, err := m.Apply(string(src))
	if err != nil {
		return "ERROR", err.Error()
	}
	abs, err := filepath.Abs(m.File)
	if err != nil {
		return "ERROR", err.Error()
	}
	dir := filepath.Join(tmp, strconv.Itoa(i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "ERROR", err.Error()
	}
	repl := filepath.Join(dir, filepath.Base(m.File))
	overlay := filepath.Join(dir, "overlay.json")
	ov, _ := json.Marshal(map[string]any{"Replace": map[string]string{abs: repl}})
	if err := os.WriteFile(repl, []byte(mutated), 0o644); err != nil {
		return "ERROR", err.Error()
	}
	if err := os.WriteFile(overlay, ov, 0o644); err != nil {
		return "ERROR", err.Error()
	}
	out, err := goTest(m.Pkg, m.Run, overlay, timeout)
	switch {
	case err == nil:
		return "SURVIVED", "(go test " + m.Pkg + " -run '" + m.Run + "' passes with the check removed)"
	case strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]"):
		return "ERROR", "the mutant does not compile:\n" + tail(out)
	}
	return "killed", firstFail(out)
}

func goTest(pkg, run, overlay string, timeout time.Duration) (string, error) {
	args := []string{"test", "-count=1", "-vet=off", "-timeout", timeout.String(), "-run", run}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	args = append(args, pkg)
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// firstFail names the first failing test of go test's output.
func firstFail(out string) string {
	for l := range strings.SplitSeq(out, "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "--- FAIL") || strings.HasPrefix(t, "panic:") {
			return "(" + t + ")"
		}
	}
	return ""
}

func tail(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

func dashJoin(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ", ")
}
