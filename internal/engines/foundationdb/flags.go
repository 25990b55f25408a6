package foundationdb

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Flags are the FoundationDB engine's flags that it binds itself (config keys and DBOPS_*
// variables of the same names). --fdb-timeout applies to every command that may call fdbcli,
// so it is bound for the verb "" (every command).
type Flags struct {
	// Timeout is fdbcli's --timeout (whole seconds).
	Timeout time.Duration
	// Processes are scale's CLASS=N entries (--processes); processes is them parsed (Validate).
	Processes []string
	// Remove names the process groups that go (scale --remove).
	Remove []string
	// ProcessClasses choose replace's pods by process class (--process-class).
	ProcessClasses []string
	// NoExclusion removes process groups without excluding them first (replace
	// --no-exclusion), which needs Force (--force).
	NoExclusion, Force bool

	processes map[string]int32
}

// The flags are the FoundationDB engine's scale request and replace choice (ops.ScaleFlags,
// ops.ReplaceFlags).
var (
	_ ops.ScaleFlags   = (*Flags)(nil)
	_ ops.ReplaceFlags = (*Flags)(nil)
)

// NewFlags returns the defaults.
func NewFlags() *Flags { return &Flags{Timeout: DefaultTimeout * time.Second} }

// AddFlags binds the flags of verb ("": the flags every command takes).
func (f *Flags) AddFlags(verb string, fs *pflag.FlagSet) {
	if verb == "" {
		fs.DurationVar(&f.Timeout, "fdb-timeout", f.Timeout, "FoundationDB: fdbcli's --timeout for each status json, kill, exclude and other fdbcli call (whole seconds, at least 1s)")
	}
	if verb == "scale" {
		fs.StringSliceVar(&f.Remove, "remove", nil, "FoundationDB: with --processes, the process groups (or their pods) that go, exactly as many per class as the new count removes (comma-separated or repeated)")
		fs.StringArrayVar(&f.Processes, "processes", nil, "FoundationDB: wanted process count per class as CLASS=N (repeatable or comma separated; classes: "+strings.Join(ProcessClasses, ", ")+")")
	}
	if verb == "replace" {
		fs.StringSliceVar(&f.ProcessClasses, "process-class", nil, "Choose every pod of these FoundationDB process classes (comma-separated or repeated)")
		fs.BoolVar(&f.NoExclusion, "no-exclusion", false, "FoundationDB: remove process groups without excluding them first (data is not moved; only for processes not running; needs --force)")
		fs.BoolVar(&f.Force, "force", false, "Allow --no-exclusion")
	}
}

// Validate checks the flags without touching the API.
func (f *Flags) Validate(func(string) bool) error {
	if f.Timeout < time.Second || f.Timeout%time.Second != 0 {
		return ops.Usagef("--fdb-timeout must be a whole number of seconds, at least 1s (got %s)", f.Timeout)
	}
	if len(f.Remove) > 0 && len(f.Processes) == 0 {
		return ops.Usagef("--remove names the FoundationDB process groups that go when --processes lowers their class; give --processes CLASS=N")
	}
	for _, g := range f.Remove {
		if strings.TrimSpace(g) == "" {
			return ops.Usagef("--remove values must not be empty")
		}
	}
	for _, v := range f.ProcessClasses {
		if strings.TrimSpace(v) == "" {
			return ops.Usagef("--process-class values must not be empty")
		}
	}
	if f.NoExclusion && !f.Force {
		return ops.Usagef("--no-exclusion removes without moving the data away first (very dangerous); it needs --force")
	}
	if f.Force && !f.NoExclusion {
		return ops.Usagef("--force only applies to --no-exclusion")
	}
	return f.parseProcesses()
}

// parseProcesses reads --processes CLASS=N[,CLASS=N] into processes.
func (f *Flags) parseProcesses() error {
	f.processes = nil
	if len(f.Processes) == 0 {
		return nil
	}
	f.processes = map[string]int32{}
	for _, arg := range f.Processes {
		for _, d := range strings.Split(arg, ",") {
			class, val, ok := strings.Cut(d, "=")
			class = strings.TrimSpace(class)
			if !ok || !slices.Contains(ProcessClasses, class) {
				return ops.Usagef("--processes %q: want CLASS=N with CLASS one of %s", d, strings.Join(ProcessClasses, ", "))
			}
			n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 32)
			if err != nil || n < -1 {
				return ops.Usagef("--processes %q: N must be a whole number of at least -1 (-1: none of the class, 0: the operator's default for the redundancy mode)", d)
			}
			if _, dup := f.processes[class]; dup {
				return ops.Usagef("--processes %s given twice", class)
			}
			f.processes[class] = int32(n)
		}
	}
	return nil
}

// ScaleFlagsGiven is "processes" when --processes asks for a scale.
func (f *Flags) ScaleFlagsGiven() []string {
	if len(f.Processes) == 0 {
		return nil
	}
	return []string{"processes"}
}

// CheckScale refuses --processes beside any other size: the counts per class are the whole
// request.
func (f *Flags) CheckScale(req ops.ScaleRequest) error {
	if len(f.Processes) > 0 && (req.Masters != nil || len(req.Data) > 0 || req.Replicas != nil || req.Primaries != nil) {
		return ops.Usagef("--processes (FoundationDB) cannot be combined with --master, --data, --replicas or --primaries")
	}
	return nil
}

// FillScale puts --processes and --remove into req.
func (f *Flags) FillScale(req *ops.ScaleRequest) {
	req.Processes, req.Remove = f.processes, f.Remove
}

// Options are the engine's options from the flags (validated by Validate).
func (f *Flags) Options() Options { return Options{Timeout: int(f.Timeout / time.Second)} }

// PodChoiceFlag is replace's --process-class.
func (f *Flags) PodChoiceFlag() string { return "process-class" }

// PodChoiceGiven reports whether --process-class chooses the pods.
func (f *Flags) PodChoiceGiven() bool { return len(f.ProcessClasses) > 0 }

// ChoosePods chooses the pods of the --process-class classes (ops.ClassPodChooser).
func (f *Flags) ChoosePods(ctx context.Context, eng ops.Engine, c *ops.Cluster) ([]string, map[string]string, error) {
	pc, ok := eng.(ops.ClassPodChooser)
	if !ok {
		return nil, nil, ops.Usagef("--process-class: engine %s (cluster %s/%s) has no process classes", eng.Name(), c.Namespace, c.Name)
	}
	return pc.PodsOfClass(ctx, c, f.ProcessClasses)
}

// CheckReplace refuses --no-exclusion with a strategy that keeps the data (only a
// replacement removes process groups).
func (f *Flags) CheckReplace(strategy string) error {
	if f.NoExclusion && strategy != ops.StrategyReplacement {
		return ops.Usagef("--no-exclusion applies to --strategy replacement only")
	}
	return nil
}

// FillReplace puts --no-exclusion and --force into req; --no-exclusion is part of the
// request the journal records (a run without it does not resume one with it).
func (f *Flags) FillReplace(req *ops.ReplaceRequest) {
	req.NoExclusion, req.Force = f.NoExclusion, f.Force
	if f.NoExclusion {
		req.Args += " --no-exclusion"
	}
}
