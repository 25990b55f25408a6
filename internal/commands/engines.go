package commands

import (
	"context"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/cratedb"
	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/etcd"
	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/foundationdb"
	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/generic"
	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/replicated"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// EngineDeps is what every engine is built from: the API clients, the
// discovered cluster, the engine's own flags and the options (shared flags,
// configuration, test seams).
type EngineDeps struct {
	Clients *Clients
	Cluster *ops.Cluster
	// Flags are the engine's own flags (EngineKind.NewFlags); nil for an engine without.
	Flags   EngineFlags
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
	// Title is how messages and help name the engine's clusters ("CrateDB"); Name when empty.
	Title string
	// NewFlags returns the engine's own flags, which it binds per verb (EngineFlags); nil
	// for an engine without. One instance serves every command of a process.
	NewFlags func() EngineFlags
	// Flags are the flags a command binds itself that only this engine reads (they fill
	// the command's request). Those and the ones NewFlags binds, given for a cluster of
	// another engine, are a usage error (checkEngineFlags), before anything runs.
	Flags []string
	Build func(ctx context.Context, d EngineDeps) (ops.Engine, error)
	// Recognizers find the engine's clusters in live state (its layouts), in the order
	// discovery tries them; nil for an engine found only by discovery's generic paths.
	Recognizers []ops.Recognizer
	// PlanNeeds are the permissions computing a plan reads beyond getting and listing pods,
	// given the engine's flags (CrateDB's port-forward); nil for none.
	PlanNeeds func(f EngineFlags) []ops.Permission
	// RunNeeds are the permissions of the API calls the engine's steps and health gates make,
	// by operation (exec, port-forwards, StatefulSet and ConfigMap updates, pod labels).
	// Steps built by internal/ops declare their own Needs; the engines' steps do not yet, so
	// their calls are listed here from the engines' code. An entry too short makes a run stop
	// half-way for lack of RBAC; too long refuses a user who could have run it.
	RunNeeds map[string][]ops.Permission
	// Operator builds the engine's operator verbs (lock --pause-operator, deny
	// --operator-instance, the operator's locks in lock status); nil for engines without.
	Operator func(d EngineDeps) (ops.OperatorControl, error)
}

// Environment variables of the replicated engine's configuration (replicated.ConfigLayers).
const (
	EnvReplicatedConfig = replicated.EnvConfig
	EnvPrimaries        = replicated.EnvPrimaries
)

// builtinEngines are this build's engines, in help order (ops.KnownEngines).
func builtinEngines() []EngineKind {
	return []EngineKind{
		{Name: ops.EngineCrateDB, Title: "CrateDB", NewFlags: func() EngineFlags { return cratedb.NewFlags() }, Recognizers: cratedb.Recognizers(),
			PlanNeeds: func(f EngineFlags) []ops.Permission {
				if pf, ok := f.(interface{ PortForwards() bool }); !ok || pf.PortForwards() {
					return need(secretsGet(), portForward())
				}
				return secretsGet()
			},
			RunNeeds: map[string][]ops.Permission{
				"restart":   need(needExec(), portForward(), secretsGet()),
				"scale":     need(needExec(), portForward(), secretsGet(), ops.Need("apps", "statefulsets", "", "update", "patch"), ops.PodWaitNeeds),
				"bootstrap": need(needExec(), portForward(), secretsGet(), ops.PodWaitNeeds),
				"replace":   need(needExec(), portForward(), secretsGet(), ops.PodWaitNeeds),
			},
			Build: func(ctx context.Context, d EngineDeps) (ops.Engine, error) {
				cfg, err := d.Flags.(*cratedb.Flags).Config(ctx, d.deps(), d.Cluster, d.Options.flagGiven)
				if err != nil {
					return nil, err
				}
				return built(cratedb.New(d.deps(), cfg))
			}},
		{Name: ops.EngineEtcd, NewFlags: func() EngineFlags { return &etcd.Flags{} }, Recognizers: etcd.Recognizers(),
			PlanNeeds: func(EngineFlags) []ops.Permission { return needExec() },
			RunNeeds: map[string][]ops.Permission{
				"restart": need(needExec()),
				"scale": need(needExec(), ops.Need("apps", "statefulsets", "", "patch"), ops.Need("", "configmaps", "", "get", "create", "update"),
					ops.Need("", "persistentvolumeclaims", "", "get", "list", "delete"), ops.PodWaitNeeds),
				"replace": need(needExec(), ops.Need("", "configmaps", "", "get", "create", "update"),
					ops.Need("", "persistentvolumeclaims", "", "get", "list", "delete"), ops.Need("", "pods", "", "delete"), ops.PodWaitNeeds),
			},
			Build: func(_ context.Context, d EngineDeps) (ops.Engine, error) {
				f := d.Flags.(*etcd.Flags)
				if err := f.Validate(d.Options.flagGiven); err != nil {
					return nil, err
				}
				return built(etcd.New(d.deps(), f.Options))
			}},
		{Name: ops.EngineFoundationDB, Title: "FoundationDB", NewFlags: func() EngineFlags { return foundationdb.NewFlags() }, Recognizers: foundationdb.Recognizers(),
			Build: func(_ context.Context, d EngineDeps) (ops.Engine, error) {
				return built(foundationdb.New(d.deps(), d.Flags.(*foundationdb.Flags).Options()))
			}, Operator: func(d EngineDeps) (ops.OperatorControl, error) {
				return foundationdb.New(d.deps(), d.Flags.(*foundationdb.Flags).Options())
			}},
		{Name: ops.EngineReplicated, NewFlags: func() EngineFlags { return replicated.NewFlags() },
			PlanNeeds: func(EngineFlags) []ops.Permission { return needExec() },
			RunNeeds: map[string][]ops.Permission{
				"bootstrap": need(needExec(), ops.Need("", "pods", "", "patch", "delete"), ops.PodWaitNeeds),
				"restart":   need(needExec(), ops.Need("", "pods", "", "patch")),
				"scale":     need(needExec(), ops.Need("", "pods", "", "patch", "delete"), ops.Need("apps", "statefulsets", "", "patch"), ops.PodWaitNeeds),
				"replace":   need(needExec(), ops.Need("", "pods", "", "patch", "delete"), ops.PodWaitNeeds),
			},
			Build: func(_ context.Context, d EngineDeps) (ops.Engine, error) {
				// A malformed configuration source is a usage error before anything runs.
				layers, err := replicated.ConfigLayers(d.Options.Getenv, func() (any, bool) {
					return d.Options.viper.Get(replicated.ConfigKey), d.Options.viper.IsSet(replicated.ConfigKey)
				})
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

// crateFlags are the CrateDB engine's flags of g, for its test seams (Connector, PollInterval).
func (g *GlobalOptions) crateFlags() *cratedb.Flags {
	return g.engineFlagsOf(ops.EngineCrateDB).(*cratedb.Flags)
}

// etcdFlags are the etcd engine's flags of g.
func (g *GlobalOptions) etcdFlags() *etcd.Flags { return g.engineFlagsOf(ops.EngineEtcd).(*etcd.Flags) }

// fdbOptions are the FoundationDB engine's options from its flags.
func (g *GlobalOptions) fdbOptions() foundationdb.Options {
	return g.engineFlagsOf(ops.EngineFoundationDB).(*foundationdb.Flags).Options()
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
