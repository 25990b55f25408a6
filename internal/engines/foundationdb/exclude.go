package foundationdb

import (
	"fmt"
	"slices"
	"strings"
)

// exclusionReport is what `fdbcli --exec 'exclude [no_wait] KEYS'` says about each exclusion:
// fdbcli resolves a locality to the addresses of the workers that have it and prints one line
// per address, on stdout when it is safe to remove, on stderr otherwise, then a warning per
// coordinator among them. The texts are fdbcli's (test/sim/fdbsim/cli.go models them).
type exclusionReport struct {
	Excluded     []string // "---- Successfully excluded. It is now safe to remove …"
	InProgress   []string // "---- WARNING: Exclusion in progress! …": data or a log still on it
	Missing      []string // "---- WARNING: Missing from cluster! …": no worker at that address
	NoMatch      []string // "---- WARNING: Currently no servers found with this locality match! …"
	Coordinators []string // "WARNING: ADDR is a coordinator!"
	Errors       []string // "ERROR: …" (an invalid address is reported on an exit code of 0)
}

// parseExclude reads the output (stdout and stderr) of fdbcli's exclude command.
func parseExclude(out string) exclusionReport {
	var r exclusionReport
	for _, line := range strings.Split(out, "\n") {
		if c, ok := strings.CutPrefix(line, "WARNING: "); ok {
			if addr, ok := strings.CutSuffix(c, " is a coordinator!"); ok {
				r.Coordinators = append(r.Coordinators, addr)
			}
			continue
		}
		if strings.HasPrefix(line, "ERROR: ") {
			r.Errors = append(r.Errors, line)
			continue
		}
		key, verdict, ok := strings.Cut(strings.TrimPrefix(line, "  "), "  ---- ")
		if !ok || !strings.HasPrefix(line, "  ") {
			continue
		}
		key = strings.TrimSuffix(key, "(Whole machine)")
		switch {
		case strings.HasPrefix(verdict, "Successfully excluded."):
			r.Excluded = append(r.Excluded, key)
		case strings.HasPrefix(verdict, "WARNING: Exclusion in progress!"):
			r.InProgress = append(r.InProgress, key)
		case strings.HasPrefix(verdict, "WARNING: Missing from cluster!"):
			r.Missing = append(r.Missing, key)
		case strings.HasPrefix(verdict, "WARNING: Currently no servers found with this locality match!"):
			r.NoMatch = append(r.NoMatch, key)
		}
	}
	return r
}

// confirmed: fdbcli reported every address it resolved as safe to remove. Anything else is
// not a confirmation, and why says what fdbcli said instead: an exclusion still moving data,
// or a locality or address fdbcli cannot find among the running workers (it then has nothing
// to check, so the exclusion cannot be confirmed until that process runs again).
func (r exclusionReport) confirmed() (bool, string) {
	switch {
	case len(r.Errors) > 0:
		return false, "fdbcli: " + strings.Join(r.Errors, "; ")
	case len(r.NoMatch) > 0:
		return false, fmt.Sprintf("fdbcli to find a running process with %s to confirm its exclusion (it reports none)", strings.Join(r.NoMatch, ", "))
	case len(r.Missing) > 0:
		return false, fmt.Sprintf("fdbcli to find %s among the running processes to confirm its exclusion (\"Missing from cluster\")", strings.Join(r.Missing, ", "))
	case len(r.InProgress) > 0:
		return false, fmt.Sprintf("the exclusion of %s (fdbcli: \"Exclusion in progress! It is not safe to remove\")", strings.Join(r.InProgress, ", "))
	case len(r.Excluded) == 0:
		return false, "fdbcli to report the exclusion (no address line in its output)"
	}
	return true, ""
}

// exclusionDone judges fdbcli's report r of excluding the pods leaving. fdbcli confirms what
// it can find among the running workers; a leaving pod whose process does not run has no
// worker, so fdbcli only warns that no server has its locality and can report nothing. For
// such a pod (and only when status json shows no process of it) the exclusion is done when
// status json shows the data healthy without it: data distribution has re-replicated what it
// held. Every other address must be "Successfully excluded".
func exclusionDone(r exclusionReport, st *Status, leaving []string) (bool, string) {
	var down []string
	rest := r
	rest.NoMatch = nil
	for _, k := range r.NoMatch {
		pod, ok := strings.CutPrefix(k, "locality_instance_id:")
		if ok && slices.Contains(leaving, pod) && len(st.ByInstance(pod)) == 0 {
			down = append(down, pod)
			continue
		}
		rest.NoMatch = append(rest.NoMatch, k)
	}
	if len(down) == 0 {
		return rest.confirmed()
	}
	if !healthy(st) {
		return false, fmt.Sprintf("the data of %s (its process does not run, so fdbcli cannot report on it) to be re-replicated: status json data healthy and fully recovered", strings.Join(down, ", "))
	}
	if len(rest.Excluded)+len(rest.InProgress)+len(rest.Missing)+len(rest.NoMatch)+len(rest.Errors) == 0 {
		return true, "" // every leaving pod is down, and the data is healthy without them
	}
	return rest.confirmed()
}
