package foundationdb

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// The engine binds scale's --processes and --remove itself (for the verb "scale" only),
// checks them without the API and fills the scale request from them.
func TestScaleFlags(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		wantErr   string
		wantProcs map[string]int32
		wantGiven []string
	}{
		{name: "none"},
		{name: "counts", args: []string{"--processes", "storage=4,log=-1", "--remove", "storage-5"},
			wantProcs: map[string]int32{"storage": 4, "log": -1}, wantGiven: []string{"processes"}},
		{name: "remove alone", args: []string{"--remove", "storage-1"}, wantErr: "give --processes CLASS=N"},
		{name: "remove empty", args: []string{"--processes", "storage=2", "--remove", " "}, wantErr: "--remove values must not be empty"},
		{name: "unknown class", args: []string{"--processes", "disk=4"}, wantErr: `--processes "disk=4": want CLASS=N with CLASS one of storage, log,`},
		{name: "below -1", args: []string{"--processes", "storage=-2"}, wantErr: "N must be a whole number of at least -1"},
		{name: "twice", args: []string{"--processes", "storage=2", "--processes", "storage=3"}, wantErr: "--processes storage given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFlags()
			fs := pflag.NewFlagSet("scale", pflag.ContinueOnError)
			f.AddFlags("scale", fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := f.Validate(func(string) bool { return false })
			if tc.wantErr != "" {
				if ops.ExitCode(err) != ops.ExitUsage || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want a usage error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var req ops.ScaleRequest
			f.FillScale(&req)
			if !maps.Equal(req.Processes, tc.wantProcs) || !slices.Equal(f.ScaleFlagsGiven(), tc.wantGiven) {
				t.Errorf("processes %v, given %v; want %v, %v", req.Processes, f.ScaleFlagsGiven(), tc.wantProcs, tc.wantGiven)
			}
		})
	}
	// Other verbs do not take them.
	fs := pflag.NewFlagSet("restart", pflag.ContinueOnError)
	NewFlags().AddFlags("restart", fs)
	if fs.Lookup("processes") != nil || fs.Lookup("remove") != nil {
		t.Error("restart binds scale's flags")
	}
}

// The engine binds replace's --process-class, --no-exclusion and --force itself, refuses
// --no-exclusion without --force (and --force alone, and --no-exclusion with a strategy that
// removes nothing), and fills the request: --no-exclusion is part of the journal's Args.
func TestReplaceFlags(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		strategy string
		wantErr  string
		wantArgs string
		choice   bool
	}{
		{name: "none", wantArgs: "A"},
		{name: "class", args: []string{"--process-class", "storage"}, choice: true, wantArgs: "A"},
		{name: "class empty", args: []string{"--process-class", " "}, wantErr: "--process-class values must not be empty"},
		{name: "no-exclusion", args: []string{"--no-exclusion", "--force"}, wantArgs: "A --no-exclusion"},
		{name: "no-exclusion without force", args: []string{"--no-exclusion"}, wantErr: "it needs --force"},
		{name: "force alone", args: []string{"--force"}, wantErr: "--force only applies to --no-exclusion"},
		{name: "no-exclusion with deletion", args: []string{"--no-exclusion", "--force"}, strategy: ops.StrategyDeletion,
			wantErr: "--no-exclusion applies to --strategy replacement only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFlags()
			fs := pflag.NewFlagSet("replace", pflag.ContinueOnError)
			f.AddFlags("replace", fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			strategy := tc.strategy
			if strategy == "" {
				strategy = ops.StrategyReplacement
			}
			err := f.Validate(func(string) bool { return false })
			if err == nil {
				err = f.CheckReplace(strategy)
			}
			if tc.wantErr != "" {
				if ops.ExitCode(err) != ops.ExitUsage || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want a usage error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			req := ops.ReplaceRequest{Args: "A"}
			f.FillReplace(&req)
			if req.Args != tc.wantArgs || req.NoExclusion != f.NoExclusion || req.Force != f.Force || f.PodChoiceGiven() != tc.choice {
				t.Errorf("request %+v, choice %v; want Args %q, choice %v", req, f.PodChoiceGiven(), tc.wantArgs, tc.choice)
			}
		})
	}
}
