// Package cratedb is the CrateDB engine: health from sys tables, the
// rolling restart gate, bootstrap and scaling, after docs/procedures.md, CrateDB.
package cratedb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Defaults for Config.
const (
	DefaultHealthChecks   = 3
	DefaultHealthInterval = 30 * time.Second
	DefaultPollInterval   = 2 * time.Second
	// DefaultPollErrors is how many database errors in a row a wait
	// tolerates (a master election takes a few seconds).
	DefaultPollErrors = 15
	// DefaultQueryTimeout bounds one statement.
	DefaultQueryTimeout = 20 * time.Second
	// SystemUser is the user the procedures act as.
	SystemUser = "system"
	// DefaultPasswordKey is the Secret key of passwords.
	DefaultPasswordKey = "password"
	// DefaultLicenseKey is the Secret key of the license.
	DefaultLicenseKey = "license"
	// crateContainer runs crash for bootstrap.
	crateContainer = "crate"
)

// Config is what the engine needs besides its clients.
type Config struct {
	// Connector opens SQL sessions (pgwire through a port-forward, or a fake).
	Connector Connector
	// SystemPassword is the Secret holding the system user's password
	// (zero = user-system-<cluster>/password, the operator's Secret).
	SystemPassword SecretRef
	// HealthChecks green checks in a row, HealthInterval apart, pass a
	// replaced pod's gate, a master-eligible removal's, and with GreenInARow
	// a restarted pod's.
	HealthChecks   int
	HealthInterval time.Duration
	// GreenInARow makes a restart gate the crate-operator's rule (HealthChecks
	// green readings in a row) instead of the evidence gate (gate.go).
	GreenInARow bool
	// StableFor is how long the evidence gate's readings must hold (default
	// DefaultStableFor).
	StableFor time.Duration
	// PollInterval paces database polls (node back, shards drained).
	PollInterval time.Duration
	// PollErrors is how many database errors in a row a wait tolerates.
	PollErrors int
	// QueryTimeout bounds one statement (default 20s).
	QueryTimeout time.Duration
	// HTTPScheme is http or https, for crash's --host ("" = from the
	// StatefulSet's -Cssl.http.enabled).
	HTTPScheme string
	// CrashUser is the user crash logs in as ("" = the user of the
	// StatefulSet's local trust entry, else crash's default).
	CrashUser string
	// AllowRollingUpdate lets scale change the gateway arguments of a
	// StatefulSet whose updateStrategy is not OnDelete (its controller
	// then restarts the pods by itself).
	AllowRollingUpdate bool
}

// Engine implements ops.Engine, ops.Scaler and ops.Bootstrapper.
type Engine struct {
	client    kubernetes.Interface
	connector Connector
	execer    kube.Executor
	cfg       Config

	mu       sync.Mutex
	sessions map[string]*session // by namespace/cluster
	pwCache  map[string]string
}

// New returns a CrateDB engine: SQL through cfg.Connector, crash through deps' executor.
func New(deps ops.EngineDeps, cfg Config) (*Engine, error) {
	if cfg.Connector == nil {
		return nil, errors.New("cratedb: no database connector")
	}
	if cfg.HealthChecks <= 0 {
		cfg.HealthChecks = DefaultHealthChecks
	}
	if cfg.HealthInterval <= 0 {
		cfg.HealthInterval = DefaultHealthInterval
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.StableFor <= 0 {
		cfg.StableFor = DefaultStableFor
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = DefaultQueryTimeout
	}
	if cfg.PollErrors <= 0 {
		cfg.PollErrors = DefaultPollErrors
	}
	return &Engine{client: deps.Client, connector: cfg.Connector, execer: deps.Executor(), cfg: cfg,
		sessions: map[string]*session{}, pwCache: map[string]string{}}, nil
}

// Name returns "cratedb".
func (e *Engine) Name() string { return ops.EngineCrateDB }

// Close ends the database connections.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var first error
	for _, s := range e.sessions {
		if err := s.close(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// systemSecret returns the Secret holding the system password.
func (e *Engine) systemSecret(c *ops.Cluster) SecretRef {
	if !e.cfg.SystemPassword.IsZero() {
		return e.cfg.SystemPassword
	}
	return SecretRef{Name: "user-system-" + c.Name, Key: DefaultPasswordKey}
}

// secret reads a Secret once per engine.
func (e *Engine) secret(ctx context.Context, ns string, ref SecretRef, what string) (string, error) {
	key := ns + "/" + ref.String()
	e.mu.Lock()
	v, ok := e.pwCache[key]
	e.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := readSecret(ctx, e.client, ns, ref, what)
	if err != nil {
		return "", err
	}
	e.mu.Lock()
	e.pwCache[key] = v
	e.mu.Unlock()
	return v, nil
}

func (e *Engine) systemPassword(ctx context.Context, c *ops.Cluster) (string, error) {
	return e.secret(ctx, c.Namespace, e.systemSecret(c), "system user password (--system-password-secret)")
}

// session returns the system user's connection to c.
func (e *Engine) session(c *ops.Cluster) *session {
	key := c.Namespace + "/" + c.Name
	e.mu.Lock()
	defer e.mu.Unlock()
	if s, ok := e.sessions[key]; ok {
		return s
	}
	s := &session{connector: e.connector, cluster: c, timeout: e.cfg.QueryTimeout, creds: func(ctx context.Context) (Credentials, error) {
		pw, err := e.systemPassword(ctx, c)
		return Credentials{User: SystemUser, Password: pw}, err
	}}
	e.sessions[key] = s
	return s
}

// HealthState is one reading of the cluster's health.
type HealthState struct {
	Nodes       int64
	Expected    int64
	MaxSeverity int64 // 0 when sys.health is empty
	MasterNode  string
	Exclusions  string
}

// Green is the definition in docs/procedures.md.
func (h HealthState) Green() bool {
	return h.Nodes == h.Expected && h.MaxSeverity <= 1 && h.MasterNode != ""
}

// Status is green, yellow or red.
func (h HealthState) Status() string {
	switch {
	case h.MaxSeverity >= 3:
		return "red"
	case h.Green():
		return "green"
	default:
		// Missing nodes or no master is not green, and not known to be red.
		return "yellow"
	}
}

func (h HealthState) String() string {
	sev := "none"
	if h.MaxSeverity > 0 {
		sev = strconv.FormatInt(h.MaxSeverity, 10)
	}
	master := h.MasterNode
	if master == "" {
		master = "none"
	}
	return fmt.Sprintf("%d/%d nodes, max severity %s, master %s", h.Nodes, h.Expected, sev, master)
}

// expectedNodes is the sum of the StatefulSets' desired replicas.
func expectedNodes(c *ops.Cluster) int64 {
	var n int64
	for _, g := range c.Groups {
		n += int64(g.Desired)
	}
	return n
}

// readHealth reads the three health facts and the exclusions in force.
func (e *Engine) readHealth(ctx context.Context, c *ops.Cluster, expected int64, avoid []string) (HealthState, error) {
	s := e.session(c)
	h := HealthState{Expected: expected}
	rows, err := s.query(ctx, avoid, sqlNodeCount)
	if err != nil {
		return h, sqlErr(sqlNodeCount, err)
	}
	h.Nodes = cellInt(rows, 0)
	if rows, err = s.query(ctx, avoid, sqlMaxSeverity); err != nil {
		return h, sqlErr(sqlMaxSeverity, err)
	}
	h.MaxSeverity = cellInt(rows, 0)
	if rows, err = s.query(ctx, avoid, sqlMasterNode); err != nil {
		return h, sqlErr(sqlMasterNode, err)
	}
	h.MasterNode = cellString(rows, 0)
	if rows, err = s.query(ctx, avoid, sqlExclusions); err != nil {
		return h, sqlErr(sqlExclusions, err)
	}
	h.Exclusions = cellString(rows, 0)
	return h, nil
}

// Health implements ops.Engine.
func (e *Engine) Health(ctx context.Context, c *ops.Cluster) (*ops.Health, error) {
	h, err := e.readHealth(ctx, c, expectedNodes(c), nil)
	if err != nil {
		return nil, err
	}
	out := &ops.Health{Status: h.Status(), Message: h.String(), Details: map[string]string{
		"nodes":         strconv.FormatInt(h.Nodes, 10),
		"expectedNodes": strconv.FormatInt(h.Expected, 10),
		"maxSeverity":   strconv.FormatInt(h.MaxSeverity, 10),
		"masterNode":    h.MasterNode,
	}}
	if h.Exclusions != "" {
		out.Details["allocationExclude"] = h.Exclusions
		out.Message += ", allocation excluded from " + h.Exclusions
	}
	// Whether shard allocation is restricted now (an interrupted restart, or crate-operator's
	// pod hooks, can leave it at primaries): status shows it, the gates do not need it.
	if rows, err := e.session(c).query(ctx, nil, sqlAllocEnable); err == nil {
		if v := cellString(rows, 0); v != "" {
			out.Details["allocationEnable"] = v
			if v != "all" {
				out.Message += ", shard allocation restricted to " + v
			}
		}
	}
	return out, nil
}

// PlanRestart implements ops.Engine: the generic rolling restart with the
// CrateDB gate around each pod.
func (e *Engine) PlanRestart(ctx context.Context, c *ops.Cluster, opts ops.RestartOptions) (*ops.Plan, error) {
	// A missing password Secret must stop the run before the first pod.
	if _, err := e.systemPassword(ctx, c); err != nil {
		return nil, err
	}
	nodes, err := e.mapNodes(ctx, c, nil)
	if err != nil {
		return nil, err
	}
	if err := nodes.problem(c); err != nil {
		return nil, err
	}
	gate := &restartGate{e: e, c: c, nodes: nodes, mode: opts.Mode}
	rr := &ops.RollingRestart{Client: e.client, Gate: gate}
	return rr.Plan(c, ops.EngineCrateDB, opts)
}

// PlanStep implements ops.RestartStepper: every step re-enables allocation when it fails,
// and a step of one pod checks, before it deletes it, that its node is the one mapped now.
func (g *restartGate) PlanStep(s *ops.Step, pods []ops.Pod) error {
	g.resetOnFailure(s)
	if len(pods) != 1 {
		if len(pods) > 1 && g.mode != ops.ModeAll {
			g.batches = append(g.batches, pods)
		}
		return nil
	}
	// A pod missing at plan time (deleted by a killed or interrupted run, being
	// recreated) still gets the gate's finish: its step is the one that run left open.
	pod := ops.Pod{Name: pods[0].Name}
	if _, live := g.c.Pod(pod.Name); live != nil {
		pod = *live
		// Every restarted pod must be recognisable when it comes back.
		if pn := g.nodes.pods[pod.Name]; pn != nil && pn.Name == "" && pn.Facts.Hostname == "" && len(pn.Facts.IPs) == 0 {
			return ops.Usagef("refusing: pod %s has no CrateDB node in sys.nodes and nothing to recognise it by (%s)", pod.Name, pn.Facts.describe())
		}
	}
	g.wrapPrecheck(s, pod)
	g.stageMark(s, pod.Name)
	return nil
}

// stageMark makes the step's Prepare (run while the step before finishes) stage the gate's
// mark, so it rides on the journal write that already carries the pod's UID and Before needs
// no write of its own: one API request less per pod. A mark staged for a step that then never
// runs only makes a failure or a resumed run re-enable allocation, which is idempotent.
func (g *restartGate) stageMark(s *ops.Step, pod string) {
	inner := s.Prepare
	if inner == nil {
		return
	}
	s.Prepare = func(sc *ops.StepContext) {
		inner(sc)
		if sc.Get(gateKey(pod)) == "" {
			sc.Stage(gateKey(pod), "pending")
		}
	}
}

// sqlErr names the statement that failed (statements carry no secrets:
// passwords are always parameters or crash arguments).
func sqlErr(sql string, err error) error {
	return fmt.Errorf("running %s: %w", sql, err)
}

func cell(rows [][]any, col int) any {
	if len(rows) == 0 || len(rows[0]) <= col {
		return nil
	}
	return rows[0][col]
}

func cellInt(rows [][]any, col int) int64 { return toInt(cell(rows, col)) }

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int32:
		return int64(x)
	case int16:
		return int64(x)
	case int8:
		return int64(x)
	case int:
		return int64(x)
	case float64:
		return int64(x)
	case float32:
		return int64(x)
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	default:
		return 0
	}
}

func cellString(rows [][]any, col int) string { return toString(cell(rows, col)) }

func toString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return string(x)
	case []any:
		parts := make([]string, 0, len(x))
		for _, p := range x {
			parts = append(parts, toString(p))
		}
		return strings.Join(parts, ",")
	default:
		return fmt.Sprint(x)
	}
}

func cellBool(rows [][]any, col int) bool {
	b, _ := cell(rows, col).(bool)
	return b
}

// wait polls check every interval until it reports done, ctx ends or it
// fails. Database state cannot be watched; the first check runs at once.
// Database polls go through pollDB, which rides out transient errors.
func wait(ctx context.Context, interval time.Duration, check func() (bool, error)) error {
	return waitBackoff(ctx, interval, interval, check)
}

// waitBackoff is wait with the interval starting at first and doubling up to last; the
// first check runs at once.
func waitBackoff(ctx context.Context, first, last time.Duration, check func() (bool, error)) error {
	interval := first
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		done, err := check()
		if err != nil || done {
			return err
		}
		timer.Reset(interval)
		interval = min(interval*2, max(last, first))
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-timer.C:
		}
	}
}

// pollDB is wait for checks that query the database: up to
// Config.PollErrors failures in a row (a master election, a node joining,
// the connection's pod going away) are reported and retried; more, or a
// usage error, end the wait.
//
// It polls with a backoff from gateFirstPoll up to PollInterval: what it waits for (a node
// joining, shards moving) is often there within a fraction of the interval.
func (e *Engine) pollDB(ctx context.Context, sc *ops.StepContext, check func() (bool, error)) error {
	return e.pollDBBackoff(ctx, sc, min(gateFirstPoll, e.cfg.PollInterval), e.cfg.PollInterval, check)
}

// execDB runs an idempotent statement, retrying transient errors like
// pollDB (a master election fails writes for a few seconds).
func (e *Engine) execDB(ctx context.Context, sc *ops.StepContext, c *ops.Cluster, avoid []string, sql string, args ...any) error {
	return e.pollDB(ctx, sc, func() (bool, error) {
		return true, e.session(c).exec(ctx, avoid, sql, args...)
	})
}

// pollDBEvery is pollDB at a fixed interval (the crate-operator's health checks).
func (e *Engine) pollDBEvery(ctx context.Context, sc *ops.StepContext, interval time.Duration, check func() (bool, error)) error {
	return e.pollDBBackoff(ctx, sc, interval, interval, check)
}

// pollDBBackoff is pollDB with its first interval first, doubled after each poll up to last.
func (e *Engine) pollDBBackoff(ctx context.Context, sc *ops.StepContext, first, last time.Duration, check func() (bool, error)) error {
	failures := 0
	return waitBackoff(ctx, first, last, func() (bool, error) {
		done, err := check()
		if err == nil {
			failures = 0
			return done, nil
		}
		// A lost lock never comes back (the write guard refuses every statement from now on):
		// no retry, as for bad input.
		if ctx.Err() != nil || errors.Is(err, ops.ErrUsage) || errors.Is(err, ops.ErrLocked) {
			return false, err
		}
		failures++
		if failures > e.cfg.PollErrors {
			return false, fmt.Errorf("%d database errors in a row, the last: %w", failures, err)
		}
		if sc != nil {
			sc.Waiting(fmt.Sprintf("database error %d of at most %d in a row, retrying: %v", failures, e.cfg.PollErrors, err))
		}
		return false, nil
	})
}
