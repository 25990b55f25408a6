package commands

import (
	"context"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/cratedb"
	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/etcd"
	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/foundationdb"
	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/generic"
	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/replicated"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// EngineDeps is what every engine is built from: the API clients, the
// discovered cluster, and the options (flags, configuration, test seams).
type EngineDeps struct {
	Clients *Clients
	Cluster *ops.Cluster
	Options *GlobalOptions
}

// deps are the engine packages' constructor dependencies (ops.EngineDeps) of d.
func (d EngineDeps) deps() ops.EngineDeps {
	return ops.EngineDeps{Client: d.Clients.Kube, Config: d.Clients.Config, Exec: d.Options.Exec, Dynamic: d.Clients.Dynamic, Clock: d.Clients.Clock}
}

// EngineKind is an engine commands can build: its name (the --engine value
// and dbops.io/engine label) and how to build it for a cluster.
type EngineKind struct {
	Name string
	// Title is how messages name the engine's clusters ("CrateDB"); Name when empty.
	Title string
	// Flags are the flags only this engine reads (another engine would ignore them): given for
	// a cluster of another engine they are a usage error (checkEngineFlags), before anything runs.
	Flags []string
	Build func(ctx context.Context, d EngineDeps) (ops.Engine, error)
	// Recognizers find the engine's clusters in live state (its layouts), in the order
	// discovery tries them; nil for an engine found only by discovery's generic paths.
	Recognizers []ops.Recognizer
	// Operator builds the engine's operator verbs (lock --pause-operator, deny
	// --operator-instance, the operator's locks in lock status); nil for engines without.
	Operator func(d EngineDeps) (ops.OperatorControl, error)
}

// crateFlags are the CrateDB engine's flags.
var crateFlags = []string{"pg-host", "pg-port", "pg-sslmode", "pg-ca-secret", "system-password-secret", "health-checks", "health-interval",
	"stable-for", "crash-user", "allow-rolling-update"}

// fdbFlags are the FoundationDB engine's flags.
var fdbFlags = []string{"fdb-timeout", "processes", "remove", "process-class", "no-exclusion"}

// fdbDefaultTimeout is --fdb-timeout's default, the engine's (fdbcli's --timeout).
const fdbDefaultTimeout = foundationdb.DefaultTimeout * time.Second

// fdbProcessClasses are the FoundationDB process classes scale --processes takes.
var fdbProcessClasses = foundationdb.ProcessClasses

// fdbOptions are the FoundationDB engine's options from the shared flags (validated by Validate).
func (o *GlobalOptions) fdbOptions() foundationdb.Options {
	return foundationdb.Options{Timeout: int(o.FDBTimeout / time.Second)}
}

// builtinEngines are this build's engines, in help order (ops.KnownEngines).
func builtinEngines() []EngineKind {
	return []EngineKind{
		{Name: ops.EngineCrateDB, Title: "CrateDB", Flags: crateFlags, Recognizers: cratedb.Recognizers(), Build: func(ctx context.Context, d EngineDeps) (ops.Engine, error) {
			cfg, err := d.Options.crateConfig(ctx, d.Clients, d.Cluster)
			if err != nil {
				return nil, err
			}
			return built(cratedb.New(d.deps(), cfg))
		}},
		{Name: ops.EngineEtcd, Flags: etcdFlags, Recognizers: etcd.Recognizers(), Build: func(_ context.Context, d EngineDeps) (ops.Engine, error) {
			if err := d.Options.Etcd.Validate(); err != nil {
				return nil, err
			}
			return built(etcd.New(d.deps(), d.Options.Etcd.Options))
		}},
		{Name: ops.EngineFoundationDB, Title: "FoundationDB", Flags: fdbFlags, Recognizers: foundationdb.Recognizers(), Build: func(_ context.Context, d EngineDeps) (ops.Engine, error) {
			return built(foundationdb.New(d.deps(), d.Options.fdbOptions()))
		}, Operator: func(d EngineDeps) (ops.OperatorControl, error) {
			return foundationdb.New(d.deps(), d.Options.fdbOptions())
		}},
		{Name: ops.EngineReplicated, Flags: []string{"primaries"}, Build: func(_ context.Context, d EngineDeps) (ops.Engine, error) {
			// A malformed configuration source is a usage error before anything runs.
			layers, err := d.Options.replicatedLayers()
			if err != nil {
				return nil, err
			}
			return built(replicated.New(d.deps(), replicated.Options{Layers: layers}))
		}},
		{Name: ops.EngineGeneric, Build: func(_ context.Context, d EngineDeps) (ops.Engine, error) {
			return built(generic.New(d.deps(), generic.Options{}))
		}},
	}
}

// built turns an engine package's New result into the builder's: no engine (not a typed
// nil in the interface) when it failed.
func built[E ops.Engine](e E, err error) (ops.Engine, error) {
	if err != nil {
		return nil, err
	}
	return e, nil
}

// engineNames are the names of the engines this build can build.
func (f *Factory) engineNames() []string {
	names := make([]string, 0, len(f.Engines))
	for _, k := range f.Engines {
		names = append(names, k.Name)
	}
	return names
}

// recognizers are the engines' recognizers, in registry order: what discovery tries.
func (f *Factory) recognizers() []ops.Recognizer {
	var out []ops.Recognizer
	for _, k := range f.Engines {
		out = append(out, k.Recognizers...)
	}
	return out
}
