package foundationdb

import (
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
}

// NewFlags returns the defaults.
func NewFlags() *Flags { return &Flags{Timeout: DefaultTimeout * time.Second} }

// AddFlags binds the flags of verb ("": the flags every command takes).
func (f *Flags) AddFlags(verb string, fs *pflag.FlagSet) {
	if verb == "" {
		fs.DurationVar(&f.Timeout, "fdb-timeout", f.Timeout, "FoundationDB: fdbcli's --timeout for each status json, kill, exclude and other fdbcli call (whole seconds, at least 1s)")
	}
}

// Validate checks the flags without touching the API.
func (f *Flags) Validate(func(string) bool) error {
	if f.Timeout < time.Second || f.Timeout%time.Second != 0 {
		return ops.Usagef("--fdb-timeout must be a whole number of seconds, at least 1s (got %s)", f.Timeout)
	}
	return nil
}

// Options are the engine's options from the flags (validated by Validate).
func (f *Flags) Options() Options { return Options{Timeout: int(f.Timeout / time.Second)} }
