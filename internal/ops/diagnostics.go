package ops

import "context"

// Diagnostic is one file of database diagnostics for a support bundle (`report`).
type Diagnostic struct {
	// Name is the file name inside the bundle's diagnostics/ folder (status.json, sys.checks.json).
	Name string
	Data []byte
	// Err is why it could not be read; Data is empty then.
	Err error
}

// Diagnoser is an optional engine capability: the database's own diagnostics, read-only
// (FoundationDB status json, CrateDB sys.checks and allocation explanations, etcd endpoint
// status), with no secret in them. A diagnostic that cannot be read carries its error; the
// bundle's manifest lists it as left out.
type Diagnoser interface {
	Diagnostics(ctx context.Context, c *Cluster) []Diagnostic
}
