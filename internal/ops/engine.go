package ops

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
)

// EngineDeps is what every engine package's constructor takes, in one shape:
// `New(deps ops.EngineDeps, opts Options) (*Engine, error)` — the cluster's API clients and
// the seams tests replace. Engine-specific settings are the second argument.
type EngineDeps struct {
	Client kubernetes.Interface
	// Config is the REST config exec and port-forwards use.
	Config *rest.Config
	// Exec runs commands in pods; nil: through the API server (kube.APIExecutor).
	Exec kube.Executor
	// Dynamic reads custom resources (an operator's cluster resource); may be nil.
	Dynamic dynamic.Interface
	// Clock is the API server's clock (nil: the local clock): times an engine compares with
	// or writes for in-cluster controllers come from it, not from the workstation.
	Clock Clock
}

// Now is Clock's time, or the local time without one.
func (d EngineDeps) Now() time.Time {
	if d.Clock != nil {
		return d.Clock.Now()
	}
	return time.Now()
}

// Executor returns Exec, or the API server's exec subresource.
func (d EngineDeps) Executor() kube.Executor {
	if d.Exec != nil {
		return d.Exec
	}
	return kube.APIExecutor{Config: d.Config, Client: d.Client}
}

// Engine adapts one kind of database. The plan/executor, lock and discovery
// are shared; an engine contributes health and the engine-specific parts of
// procedures.
//
// Every capability a command looks for is declared in this file: Engine
// (status, restart), Scaler, Bootstrapper, PodReplacer (replace), and the
// helpers MemberChecker (replace --failed), Explainer (explain), Diagnoser
// (report) and Closer. Each implementation asserts the ones it has at compile time (`var _ ops.Scaler = (*Engine)(nil)`
// in the engine's contract.go), so a drifting signature fails the build
// instead of turning a feature into "not available for engine X". The rolling
// restart's own hooks (RestartGate, RestartOrderer, RestartStepper,
// RestartPreflighter in restart.go, BatchChecker in batches.go) and
// ReplaceHooks (replace.go) are how an engine plugs into the shared
// procedures; the optional ones are found by type assertion too, so the same
// contract.go asserts each hook its types implement.
type Engine interface {
	Name() string
	// Health reports database-level health for status and health gates;
	// (nil, nil) when the engine has no notion of it.
	Health(ctx context.Context, c *Cluster) (*Health, error)
	// PlanRestart computes a rolling restart plan.
	PlanRestart(ctx context.Context, c *Cluster, opts RestartOptions) (*Plan, error)
}

// Health is an engine's view of the database.
type Health struct {
	// Status is engine-specific but short: green|yellow|red for CrateDB,
	// healthy|degraded|no-quorum for etcd.
	Status  string            `json:"status"`
	Message string            `json:"message,omitempty"`
	Details map[string]string `json:"details,omitempty"`
	// Values are the same facts as typed JSON (numbers, booleans, objects) for pipelines
	// (status -o json): Details are for people and their strings are not parsed back.
	Values map[string]any `json:"values,omitempty"`
	// Table is an optional per-member view (etcd members, say) that
	// status prints under the health line.
	Table *Table `json:"table,omitempty"`
	// Volatile names Details that change with time alone (seconds remaining, say): a change
	// of theirs alone does not make `status --watch` print a new document.
	Volatile []string `json:"-"`
}

// Table is a titled grid of strings.
type Table struct {
	Title   string     `json:"title"`
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
	// VolatileColumns are the indexes of columns that change with time alone (an uptime).
	VolatileColumns []int `json:"-"`
}

// MarshalJSON adds "items", each row as an object keyed by its column in lowerCamelCase
// ("PROCESS GROUP" -> "processGroup"), so that pipelines select by name (jq
// '.health.table.items[] | select(.pod == "x")') rather than by column position.
func (t Table) MarshalJSON() ([]byte, error) {
	type plain Table
	items := make([]map[string]string, 0, len(t.Rows))
	for _, r := range t.Rows {
		item := make(map[string]string, len(t.Columns))
		for i, c := range t.Columns {
			if i < len(r) {
				item[camelKey(c)] = r[i]
			}
		}
		items = append(items, item)
	}
	return json.Marshal(struct {
		plain
		Items []map[string]string `json:"items"`
	}{plain(t), items})
}

// camelKey is a column title as a JSON key: "PROCESS GROUP" -> "processGroup".
func camelKey(title string) string {
	var b strings.Builder
	for i, w := range strings.FieldsFunc(strings.ToLower(title), func(r rune) bool { return r == ' ' || r == '-' || r == '_' }) {
		if i > 0 {
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		b.WriteString(w)
	}
	return b.String()
}

// HealthPoller is implemented by engines whose health lives only in the database (no
// Kubernetes object changes with it): `status --watch` re-reads their health every interval
// besides on every change it watches.
type HealthPoller interface {
	HealthPollInterval() time.Duration
}

// RestartOptions is what the user asked of a rolling restart.
type RestartOptions struct {
	// Groups limits the restart to these node groups (empty = all).
	Groups []string
	// Mode is how many pods go at once: ModePod (default), ModeZone or
	// ModeAll.
	Mode string
	// MaxUnavailableZones, when set, makes each batch wait (watching pods)
	// until at most this many zones other than the batch's own have
	// unavailable pods, instead of refusing when another pod is not Ready.
	MaxUnavailableZones *int
	// Pods limits the restart to these pods (empty = all); used by
	// replace --strategy deletion.
	Pods []string
	// BatchSize is how many pods one step restarts together in pod mode
	// (replace --max-concurrent); 0 or 1 = one at a time.
	BatchSize int
	// Method is how a pod is restarted (--method): MethodPod (delete it; the only one the
	// shared procedure knows) or an engine's own (FoundationDB "process": bounce its
	// processes). Empty: the engine's default.
	Method string
}

// MethodPod restarts a pod by deleting it.
const MethodPod = "pod"

// ScaleRequest is what the user asked of `scale`. Engines read the fields
// that apply to them and refuse the others with a usage error.
type ScaleRequest struct {
	// Masters is the wanted size of the master node group (nil = keep).
	Masters *int32
	// Data maps data node groups to wanted sizes (CrateDB --data g=N).
	Data map[string]int32
	// Replicas is the wanted size of a single-group cluster (etcd,
	// replicated apps: --replicas N).
	Replicas *int32
	// Primaries is the wanted number of primaries (replicated apps).
	Primaries *int32
	// Processes maps FoundationDB process classes to wanted process counts (--processes).
	Processes map[string]int32
	// Remove names the FoundationDB process groups (or their pods) that go when --processes
	// lowers their class (--remove): spec.processGroupsToRemove, in the same patch.
	Remove []string
	// Journal is the cluster's unfinished operation record, read (without
	// the lock) before planning; nil when there is none. An engine uses it
	// to finish a run that crashed after its last size change, when live
	// sizes already match the request.
	Journal *Journal
}

// ScaleFlags is implemented by an engine's own flags (bound by the engine for the verb
// "scale") that ask for a scale of their own kind (FoundationDB's --processes and --remove,
// the replicated engine's --primaries): the command learns from them whether they ask one,
// whether it goes with the rest of the request, and how to fill the request.
type ScaleFlags interface {
	// ScaleFlagsGiven names the flags that ask for a scale (without "--"); none when not given.
	ScaleFlagsGiven() []string
	// CheckScale refuses, without the API, what they ask beside the rest of req: the
	// command's own flags and what the engines' flags filled in (FillScale).
	CheckScale(req ScaleRequest) error
	// FillScale puts what they ask into req (checked already by the flags' Validate).
	FillScale(req *ScaleRequest)
}

// Scaler is implemented by engines that can scale.
type Scaler interface {
	PlanScale(ctx context.Context, c *Cluster, req ScaleRequest) (*Plan, error)
}

// BootstrapRequest is what the user asked of `bootstrap`. Engines read the
// fields that apply to them; the command refuses the others.
type BootstrapRequest struct {
	// License is the Secret with the license key (CrateDB; zero = none).
	License SecretRef
	// Users get created (if missing) with the password from their Secret
	// and all privileges (CrateDB).
	Users []UserRequest
	// Primaries overrides the configured number of primaries (replicated
	// apps; nil = configured).
	Primaries *int32
}

// UserRequest is one --user NAME=SECRET[/KEY].
type UserRequest struct {
	Name     string
	Password SecretRef
}

// SecretRef names one key of a Secret in the cluster's namespace.
type SecretRef struct {
	Name string
	Key  string
}

func (r SecretRef) String() string { return r.Name + "/" + r.Key }

// IsZero reports an unset reference.
func (r SecretRef) IsZero() bool { return r.Name == "" }

// Bootstrapper is implemented by engines that can bootstrap a new cluster.
type Bootstrapper interface {
	PlanBootstrap(ctx context.Context, c *Cluster, req BootstrapRequest) (*Plan, error)
}

// PodReplacer is implemented by engines that can replace pods with the
// replacement strategy (data moved away, fresh PVC, the member rejoins).
// Deletion needs no engine support beyond its restart gate.
type PodReplacer interface {
	PlanReplacement(ctx context.Context, c *Cluster, req ReplaceRequest) (*Plan, error)
}

// MemberChecker is implemented by engines that can tell which pods run
// but are not members of the database cluster (CrateDB: node missing from
// sys.nodes; etcd: no member for the pod). The map holds a reason per pod.
type MemberChecker interface {
	NotMembers(ctx context.Context, c *Cluster) (map[string]string, error)
}

// ReplaceFlags is implemented by an engine's own flags (bound by the engine for the verb
// "replace") that choose the pods another way (FoundationDB's --process-class) or change how
// they are removed (--no-exclusion): the command counts the choice among its own ways to
// choose, asks them for the pods, and lets the cluster's engine fill the request.
type ReplaceFlags interface {
	// PodChoiceFlag names the flag that chooses the pods (without "--"); "" for none.
	PodChoiceFlag() string
	// PodChoiceGiven reports whether it was given.
	PodChoiceGiven() bool
	// ChoosePods chooses the pods of cluster c (eng is its engine) and says why each.
	ChoosePods(ctx context.Context, eng Engine, c *Cluster) (pods []string, reasons map[string]string, err error)
	// CheckReplace checks the flags against the replacement strategy, without the API.
	CheckReplace(strategy string) error
	// FillReplace puts what they ask into req, its Args (the journal's request) included.
	FillReplace(req *ReplaceRequest)
}

// ClassPodChooser is implemented by engines whose pods run processes of named classes
// (FoundationDB): `replace --process-class` chooses the pods by it. reasons says why each pod
// was chosen; an unknown class is a usage error naming the classes there are.
type ClassPodChooser interface {
	PodsOfClass(ctx context.Context, c *Cluster, classes []string) (pods []string, reasons map[string]string, err error)
}

// Closer is implemented by engines that keep connections (CrateDB's
// port-forward and database sessions); the command closes them at the end.
type Closer interface {
	Close(ctx context.Context) error
}

// Explainer is an optional engine capability: the engine's own preconditions of operation
// (restart, scale, replace) as a checklist, evaluated by the same functions its procedures
// gate on, read-only. explain adds the shared ones (lock, RBAC, operator ownership, the
// procedure's preflight).
type Explainer interface {
	Explain(ctx context.Context, c *Cluster, operation string) ([]Check, error)
}

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
