// Package replicated is the kubectl-dbops engine for replicated
// applications run as one StatefulSet whose members are driven by commands
// run by exec in the pods: sequence (prints how far a member's data goes),
// seed (first member only), primary, secondary, stop and status.
//
// Conventions:
//   - configuration (see Layer): flags > DBOPS_REPLICATED_CONFIG /
//     DBOPS_PRIMARIES > the config file's "replicated" section > the
//     StatefulSet annotation dbops.io/replicated-config > defaults;
//   - a member's role is the pod label dbops.io/role=primary|secondary|failed;
//     a recreated pod has no role until a procedure gives it one;
//   - members reach each other as <pod>.<serviceName>.<namespace>.svc; role
//     commands get the running primaries' names as arguments (kwok and some
//     exec paths never close stdin, so nothing is passed on it).
package replicated

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Labels and annotations this engine reads and writes.
const (
	// LabelRole on a pod is the member's role.
	LabelRole = "dbops.io/role"
	// AnnotationConfig on the StatefulSet holds a Layer as JSON or YAML.
	AnnotationConfig = "dbops.io/replicated-config"
)

// Roles a member can have.
const (
	RolePrimary   = "primary"
	RoleSecondary = "secondary"
	RoleFailed    = "failed"
)

// Engine implements ops.Engine, ops.Scaler and ops.Bootstrapper.
type Engine struct {
	Client kubernetes.Interface
	Exec   kube.Executor
	// Layers are the configuration sources above the StatefulSet
	// annotation, highest precedence first.
	Layers []*Layer
}

// Options are the replicated engine's settings.
type Options struct {
	// Layers are the configuration sources above the StatefulSet annotation, highest
	// precedence first.
	Layers []*Layer
}

// New returns a replicated-application engine that runs the role commands through deps'
// executor.
func New(deps ops.EngineDeps, opts Options) (*Engine, error) {
	return &Engine{Client: deps.Client, Exec: deps.Executor(), Layers: opts.Layers}, nil
}

// Name returns "replicated".
func (e *Engine) Name() string { return ops.EngineReplicated }

// BootstrapRequest is the bootstrap request; this engine reads Primaries.
type BootstrapRequest = ops.BootstrapRequest

// site is the resolved shape of the cluster: one StatefulSet.
type site struct {
	ns       string
	sts      string
	svc      string
	selector string
	desired  int
	stsUID   string
	// container is the application container (Config.Container, "" for the pod's first):
	// its restarts make a role label stale (incarnation.go).
	container string
	// noTimeout is set once a pod's container had no timeout command: query commands then
	// run unwrapped (runQuery).
	noTimeout atomic.Bool
}

func newSite(c *ops.Cluster) (*site, error) {
	if len(c.Groups) != 1 || ops.StatefulSetOf(c.Groups[0]) == nil {
		return nil, ops.Usagef("the replicated engine handles clusters of exactly one StatefulSet; %s/%s has %d", c.Namespace, c.Name, len(c.Groups))
	}
	g := c.Groups[0]
	sts := ops.StatefulSetOf(g)
	s := &site{ns: c.Namespace, sts: sts.Name, svc: sts.Spec.ServiceName, desired: int(g.Desired), stsUID: string(sts.UID)}
	if s.svc == "" {
		s.svc = sts.Name
	}
	if sts.Spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("StatefulSet %s/%s selector: %w", s.ns, s.sts, err)
		}
		s.selector = sel.String()
	}
	return s, nil
}

// dns is a member's stable network name.
func (s *site) dns(pod string) string { return pod + "." + s.svc + "." + s.ns + ".svc" }

func (s *site) dnsNames(pods []string) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, s.dns(p))
	}
	return out
}

// ordinal parses "<sts>-<n>"; -1 when pod is not the StatefulSet's.
func (s *site) ordinal(pod string) int { return kube.PodOrdinal(s.sts, pod) }

func (s *site) podName(o int) string { return fmt.Sprintf("%s-%d", s.sts, o) }

func (s *site) stsRef() ops.ObjectRef {
	return ops.ObjectRef{Kind: "StatefulSet", APIVersion: "apps/v1", Namespace: s.ns, Name: s.sts, UID: s.stsUID}
}

func (s *site) podRef(m member) ops.ObjectRef {
	return ops.ObjectRef{Kind: "Pod", APIVersion: "v1", Namespace: s.ns, Name: m.Name, UID: string(m.UID)}
}

// member is a live pod of the StatefulSet.
type member struct {
	Name     string
	Ordinal  int
	UID      types.UID
	Role     string
	Ready    bool
	Pending  bool
	Deleting bool
	// Stale, when set, is the role label the pod carries and why it is not trusted (its
	// container restarted since); Role is then "".
	Stale string
}

// members lists the StatefulSet's pods by ordinal: inside a run (sc, or the
// informer ctx carries) from the run's pod informer, with no request of its
// own; at plan time and for status with one list.
func (e *Engine) members(ctx context.Context, sc *ops.StepContext, s *site) ([]member, error) {
	pods, err := ops.ListPods(ctx, sc, e.Client, s.ns, s.selector)
	if err != nil {
		return nil, fmt.Errorf("pods of StatefulSet %s/%s: %w", s.ns, s.sts, err)
	}
	var out []member
	for _, p := range pods {
		o := s.ordinal(p.Name)
		if o < 0 {
			continue
		}
		m := member{Name: p.Name, Ordinal: o, UID: p.UID, Role: p.Labels[LabelRole], Ready: ops.PodReady(p),
			Pending: p.Status.Phase == corev1.PodPending, Deleting: p.DeletionTimestamp != nil}
		if m.Role == RolePrimary || m.Role == RoleSecondary {
			if why := staleRole(p, s.container); why != "" {
				m.Stale = m.Role + ": " + why
				m.Role = ""
			}
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b member) int { return a.Ordinal - b.Ordinal })
	return out, nil
}

// checkSettled refuses unless the StatefulSet has exactly its desired pods
// (ordinals 0..desired-1), none Pending or being deleted.
func checkSettled(s *site, ms []member, desired int) error {
	var extra, pending []string
	have := map[int]bool{}
	for _, m := range ms {
		switch {
		case m.Ordinal >= desired:
			extra = append(extra, m.Name)
		case m.Pending || m.Deleting:
			pending = append(pending, m.Name)
		}
		have[m.Ordinal] = true
	}
	var missing []string
	for o := range desired {
		if !have[o] {
			missing = append(missing, s.podName(o))
		}
	}
	if len(extra)+len(pending)+len(missing) == 0 {
		return nil
	}
	var why []string
	if len(missing) > 0 {
		why = append(why, "missing "+strings.Join(missing, ", "))
	}
	if len(pending) > 0 {
		why = append(why, "pending or terminating "+strings.Join(pending, ", "))
	}
	if len(extra) > 0 {
		why = append(why, "beyond the desired size "+strings.Join(extra, ", "))
	}
	return ops.Preconditionf("StatefulSet %s/%s must have exactly its %d desired pods and none Pending before roles change (%s); wait for it and run again",
		s.ns, s.sts, desired, strings.Join(why, "; "))
}

// seq is a member's sequence number as read.
type seq struct {
	Value uint64
	OK    bool
	// Note says why there is no number.
	Note string
}

func (q seq) String() string {
	if q.OK {
		return strconv.FormatUint(q.Value, 10)
	}
	if q.Note != "" {
		return "none (" + q.Note + ")"
	}
	return "none"
}

// errMalformed marks sequence output that is not one unsigned integer.
var errMalformed = errors.New("sequence output is not one unsigned integer")

// sequence runs the sequence command in pod. A failing command means no
// number; output that is not an unsigned integer is errMalformed.
func (e *Engine) sequence(ctx context.Context, s *site, cfg *Config, pod string) (seq, error) {
	out, _, err := e.run(ctx, nil, s, cfg, CmdSequence, pod, nil)
	if err != nil {
		if ctx.Err() != nil {
			return seq{}, err
		}
		return seq{Note: shortErr(err)}, nil
	}
	text := strings.TrimSpace(string(out))
	v, perr := strconv.ParseUint(text, 10, 64)
	if perr != nil {
		return seq{Note: fmt.Sprintf("printed %q", truncate(text, 40))},
			fmt.Errorf("%w: pod %s printed %q", errMalformed, pod, truncate(text, 80))
	}
	return seq{Value: v, OK: true}, nil
}

// sequences reads the numbers of pods; strict turns malformed output into a
// usage error (plan time), else it counts as no number (run time).
func (e *Engine) sequences(ctx context.Context, s *site, cfg *Config, pods []string, strict bool) (map[string]seq, error) {
	out := map[string]seq{}
	for _, p := range pods {
		q, err := e.sequence(ctx, s, cfg, p)
		if err != nil {
			if errors.Is(err, errMalformed) {
				if strict {
					return nil, ops.Usagef("replicated configuration: %v; the sequence command must print one unsigned integer on stdout (fix replicated.commands.sequence)", err)
				}
			} else {
				return nil, err
			}
		}
		out[p] = q
	}
	return out, nil
}

// run executes a configured command with extra arguments, bounded by its
// timeout. The error names the command and pod and the last line of
// stderr, never argv.
//
// A role command (seed, primary, secondary, stop) that times out may still
// be running in the container: neither the kubelet nor the runtime ends an
// exec'd process when its client gives up, and a hung promotion that
// completes later would make a second primary. So its pod is deleted and
// run returns only once that incarnation is gone (its containers stopped),
// before any other candidate is tried; the error then has PodStopped set. If
// the pod cannot be stopped, run returns an error that stops the operation.
//
// sc is the step running it (nil outside a run): a role command's pod is read
// from the run's pod informer.
func (e *Engine) run(ctx context.Context, sc *ops.StepContext, s *site, cfg *Config, name, pod string, args []string) ([]byte, []byte, error) {
	c := cfg.Commands[name]
	if c == nil {
		return nil, nil, fmt.Errorf("command %s is not configured", name)
	}
	var uid types.UID
	if isRoleCommand(name) {
		// Role commands stop, seed or promote a database: a run that lost its lock runs none.
		// Every one goes through here, so no step can skip the check.
		if err := kube.CheckWriteGuard(ctx); err != nil {
			return nil, nil, fmt.Errorf("not running command %s in pod %s: %w", name, pod, err)
		}
		p, err := e.getPod(ctx, sc, s, pod)
		if err != nil {
			return nil, nil, err
		}
		if p == nil {
			return nil, nil, &CommandError{Name: name, Pod: pod, Err: fmt.Errorf("pod %s does not exist", pod)}
		}
		uid = p.UID
	}
	argv := append(slices.Clone(c.Argv), args...)
	if !isRoleCommand(name) {
		return e.runQuery(ctx, s, cfg, c, name, pod, argv)
	}
	cctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	stdout, stderr, err := e.Exec.Exec(cctx, s.ns, pod, cfg.Container, argv, nil)
	if err != nil {
		ce := &CommandError{Name: name, Pod: pod, Stderr: lastLine(stderr), Err: err}
		var ee *kube.ExitError
		switch {
		case errors.As(err, &ee):
			ce.Code = ee.Code
		case cctx.Err() != nil && ctx.Err() == nil:
			ce.Timeout = c.Timeout
		}
		if ce.Timeout != 0 && isRoleCommand(name) {
			if serr := e.stopPod(ctx, sc, s, pod, uid); serr != nil {
				return stdout, stderr, ops.Preconditionf("%v, and its pod could not be stopped to end it (%v); stopping here so that no other pod is given a role while it may still run", ce, serr)
			}
			ce.PodStopped = true
		}
		err = ce
	}
	return stdout, stderr, err
}

// isRoleCommand: the command changes what a member serves, so a timed-out
// one must be ended.
func isRoleCommand(name string) bool {
	switch name {
	case CmdSeed, CmdPrimary, CmdSecondary, CmdStop:
		return true
	}
	return false
}

// stopPod deletes the incarnation uid of pod and watches until it is gone:
// the kubelet removes the pod object only after its containers stopped, so
// nothing started in it runs any more.
func (e *Engine) stopPod(ctx context.Context, sc *ops.StepContext, s *site, pod string, uid types.UID) error {
	if err := ops.DeletePod(ctx, e.Client, s.ns, pod, uid); err != nil {
		return err
	}
	_, err := ops.WaitPod(ctx, sc, e.Client, s.ns, pod, func(p *corev1.Pod) (bool, error) {
		return p == nil || p.UID != uid, nil
	})
	return err
}

// podStopped reports whether err is a command whose pod run already stopped.
func podStopped(err error) bool {
	var ce *CommandError
	return errors.As(err, &ce) && ce.PodStopped
}

// CommandError is a configured command that failed in a pod. Its text
// names the command, the pod and the last line of stderr, never argv
// (which may hold credentials).
type CommandError struct {
	Name string
	Pod  string
	// Code is the exit code (0 when the command did not exit by itself).
	Code int
	// Timeout is set when the command's timeout ended it.
	Timeout time.Duration
	// PodStopped: the command timed out and its pod was deleted (and is
	// gone) to end it.
	PodStopped bool
	// Ended: a query command that timed out was killed in the pod by timeout(1); MayRun: it
	// timed out in a container without timeout(1), so nothing ended it.
	Ended, MayRun bool
	Stderr        string
	Err           error
}

func (e *CommandError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s command in pod %s ", e.Name, e.Pod)
	switch {
	case e.Code != 0:
		fmt.Fprintf(&b, "exited with code %d", e.Code)
	case e.Timeout != 0 && e.PodStopped:
		fmt.Fprintf(&b, "did not finish within %s; the pod was deleted to end it", e.Timeout)
	case e.Timeout != 0 && e.Ended:
		fmt.Fprintf(&b, "did not finish within %s and was ended in the pod", e.Timeout)
	case e.Timeout != 0 && e.MayRun:
		fmt.Fprintf(&b, "did not finish within %s; it may still run in the pod (its container has no timeout command to end it)", e.Timeout)
	case e.Timeout != 0:
		fmt.Fprintf(&b, "did not finish within %s", e.Timeout)
	default:
		fmt.Fprintf(&b, "failed: %v", e.Err)
	}
	if e.Stderr != "" {
		b.WriteString(": " + e.Stderr)
	}
	return b.String()
}

// Unwrap exposes the exec error (e.g. *kube.ExitError, context errors).
func (e *CommandError) Unwrap() error { return e.Err }

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return truncate(strings.TrimSpace(lines[len(lines)-1]), 200)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// shortErr is the first clause of an error, for plan notes.
func shortErr(err error) string {
	var ee *kube.ExitError
	if errors.As(err, &ee) {
		return fmt.Sprintf("exit %d", ee.Code)
	}
	return truncate(err.Error(), 80)
}

// config resolves the configuration: the engine's layers, then the
// StatefulSet annotation. extra (a flag) goes on top.
func (e *Engine) config(c *ops.Cluster, extra *Layer) (*Config, error) {
	layers := []*Layer{extra}
	layers = append(layers, e.Layers...)
	if len(c.Groups) == 1 && ops.StatefulSetOf(c.Groups[0]) != nil {
		if v, ok := ops.StatefulSetOf(c.Groups[0]).Annotations[AnnotationConfig]; ok {
			l, err := ParseLayer([]byte(v), "annotation "+AnnotationConfig+" of StatefulSet "+ops.StatefulSetOf(c.Groups[0]).Name)
			if err != nil {
				return nil, err
			}
			layers = append(layers, l)
		}
	}
	return Resolve(layers...)
}

// rank orders candidates for a role: highest sequence number first, pods
// without a number last, ties to the lowest ordinal (numerically).
func rank(ms []member, seqs map[string]seq) []member {
	out := slices.Clone(ms)
	slices.SortStableFunc(out, func(a, b member) int {
		qa, qb := seqs[a.Name], seqs[b.Name]
		switch {
		case qa.OK != qb.OK:
			if qa.OK {
				return -1
			}
			return 1
		case qa.OK && qa.Value != qb.Value:
			if qa.Value > qb.Value {
				return -1
			}
			return 1
		}
		return a.Ordinal - b.Ordinal
	})
	return out
}

// stopOrder orders primaries to stop: lowest sequence number first (no
// number before any number), ties to the highest ordinal.
func stopOrder(ms []member, seqs map[string]seq) []member {
	out := rank(ms, seqs)
	slices.Reverse(out)
	return out
}

func names(ms []member) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

func withRole(ms []member, role string, below int) []member {
	var out []member
	for _, m := range ms {
		if m.Role == role && m.Ordinal < below {
			out = append(out, m)
		}
	}
	return out
}
