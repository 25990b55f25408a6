package replicated

import (
	"github.com/spf13/pflag"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Flags are the replicated engine's flags that it binds itself: --primaries, for scale and
// bootstrap (config key and DBOPS_PRIMARIES as for every flag; a value from there is not
// "given" and reaches the engine through ConfigLayers instead).
type Flags struct {
	// Primaries is the wanted number of primaries (--primaries).
	Primaries int32

	// scale and bootstrap are --primaries as bound for each verb: whether it was given on the
	// command line (pflag's Changed) decides whether it asks anything.
	scale, bootstrap *pflag.Flag
}

// The flags fill the scale request (ops.ScaleFlags).
var _ ops.ScaleFlags = (*Flags)(nil)

// NewFlags returns the defaults.
func NewFlags() *Flags { return &Flags{} }

// AddFlags binds the flags of verb.
func (f *Flags) AddFlags(verb string, fs *pflag.FlagSet) {
	switch verb {
	case "scale":
		fs.Int32Var(&f.Primaries, "primaries", 0, "Replicated apps: wanted number of primaries, at least 0 (default: from the configuration, else 1)")
		f.scale = fs.Lookup("primaries")
	case "bootstrap":
		fs.Int32Var(&f.Primaries, "primaries", 0, "Replicated apps: number of primaries, at least 1 (default: from the configuration, else 1)")
		f.bootstrap = fs.Lookup("primaries")
	}
}

func changed(fl *pflag.Flag) bool { return fl != nil && fl.Changed }

// Validate checks the flags without touching the API.
func (f *Flags) Validate(func(string) bool) error {
	if changed(f.bootstrap) && f.Primaries < 1 {
		return ops.Usagef("--primaries %d: bootstrap needs at least 1 primary", f.Primaries)
	}
	if changed(f.scale) && f.Primaries < 0 {
		return ops.Usagef("--primaries %d: must be at least 0", f.Primaries)
	}
	return nil
}

// ScaleFlagsGiven is "primaries" when scale --primaries was given.
func (f *Flags) ScaleFlagsGiven() []string {
	if !changed(f.scale) {
		return nil
	}
	return []string{"primaries"}
}

// CheckScale refuses --primaries beside CrateDB's --master or --data, and more primaries
// than --replicas.
func (f *Flags) CheckScale(req ops.ScaleRequest) error {
	if !changed(f.scale) {
		return nil
	}
	if req.Masters != nil || len(req.Data) > 0 {
		return ops.Usagef("--primaries cannot be combined with --master or --data: use it alone or with --replicas (replicated apps)")
	}
	if req.Replicas != nil && f.Primaries > *req.Replicas {
		return ops.Usagef("--primaries %d is more than --replicas %d", f.Primaries, *req.Replicas)
	}
	return nil
}

// FillScale puts --primaries into req.
func (f *Flags) FillScale(req *ops.ScaleRequest) {
	if changed(f.scale) {
		p := f.Primaries
		req.Primaries = &p
	}
}

// FillBootstrap puts --primaries into req.
func (f *Flags) FillBootstrap(req *ops.BootstrapRequest) {
	if changed(f.bootstrap) {
		p := f.Primaries
		req.Primaries = &p
	}
}
