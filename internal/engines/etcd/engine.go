// Package etcd is the kubectl-dbops engine for etcd clusters run as one
// StatefulSet (plain "<name>" with "<name>-headless", or the Bitnami chart's
// "<release>-etcd"): health and quorum, rolling restart with the leader
// last, scaling one member at a time through learners, and member repair.
// It talks to etcd through etcdctl run by exec in a member's pod; where
// etcdctl cannot take the password (an image without stty, apictl.go),
// through etcd's v3 gateway over a port-forward to the member.
//
// Conventions:
//   - peer URL of a pod: Options.PeerURLTemplate, else the StatefulSet
//     annotation dbops.io/etcd-peer-url-template, else derived from the
//     started members' peer URLs (pod name substituted), else from the pod
//     spec's ETCD_INITIAL_ADVERTISE_PEER_URLS ($(VAR) of metadata.name),
//     else http://{{.Pod}}.{{.Service}}.{{.Namespace}}.svc.cluster.local:2380.
//     Templates are Go templates over PeerURLData with an "add" function;
//   - membership for pods started later is recorded in the ConfigMap
//     "<statefulset>-cluster-state" (annotation
//     dbops.io/etcd-cluster-state-configmap overrides), keys
//     ETCD_INITIAL_CLUSTER and ETCD_INITIAL_CLUSTER_STATE=existing, meant
//     to be read by the pods through envFrom;
//   - etcdctl flags: the client URL from the member's own
//     --listen-client-urls/--advertise-client-urls, client TLS files from
//     --trusted-ca-file/--cert-file/--key-file (never the peer files),
//     ETCDCTL_* env used as the pod sets it; with auth enabled the root
//     password comes from a Secret (--etcd-auth-secret, or the Bitnami
//     chart's ETCD_ROOT_PASSWORD Secret) and goes to etcdctl on stdin;
//   - member IDs are hex everywhere (etcdctl -w json prints decimal).
package etcd

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Options are explicit settings; zero values mean "find out from the
// StatefulSet".
type Options struct {
	// PeerURLTemplate overrides the peer URL of each pod (see
	// AnnotationPeerURLTemplate).
	PeerURLTemplate string
	// ConfigMap names the cluster-state ConfigMap.
	ConfigMap string
	// Container is the container to exec etcdctl in.
	Container string
	// Endpoint is etcdctl's --endpoints inside the pod.
	Endpoint string
	// CACert, Cert and Key are file paths inside the pod.
	CACert, Cert, Key string
	// AuthSecret names the Secret NAME[/KEY] with the password of an
	// auth-enabled cluster's root user (key DefaultAuthPasswordKey, user
	// from key DefaultAuthUserKey, else User, else root). Without it the
	// Bitnami chart's ETCD_ROOT_PASSWORD Secret is used when the pod has it.
	AuthSecret string
	// User overrides the user etcdctl authenticates as.
	User string
	// PollInterval paces waits on etcd's own conditions (learner in sync,
	// member caught up); default 1s.
	PollInterval time.Duration
	// MaxLag is how many raft entries a restarted member, or a learner
	// before its promotion, may trail the leader and count as caught up;
	// default 100.
	MaxLag uint64
}

// Engine implements ops.Engine and ops.Scaler for etcd.
type Engine struct {
	Client  kubernetes.Interface
	Exec    kube.Executor
	Options Options
	// Forward reaches a member's client port for the etcd API path
	// (apictl.go); nil: that path is unavailable.
	Forward Forwarder
}

// New returns an engine that runs etcdctl through deps' executor (the API server's exec),
// and reaches members' client ports by port-forwards for the etcd API path.
func New(deps ops.EngineDeps, opts Options) (*Engine, error) {
	return &Engine{Client: deps.Client, Exec: deps.Executor(), Options: opts, Forward: KubeForwarder{Config: deps.Config}}, nil
}

// Name returns "etcd".
func (e *Engine) Name() string { return ops.EngineEtcd }

func (e *Engine) pollInterval() time.Duration {
	if e.Options.PollInterval > 0 {
		return e.Options.PollInterval
	}
	return time.Second
}

func (e *Engine) maxLag() uint64 {
	if e.Options.MaxLag > 0 {
		return e.Options.MaxLag
	}
	return 100
}

// prepare resolves the site and reads the live status; the peer URL
// template may depend on the members.
func (e *Engine) prepare(ctx context.Context, c *ops.Cluster) (*site, *Status, error) {
	return e.prepareFor(ctx, c, true)
}

// prepareFor is prepare; mutating plans also need root credentials when
// auth is enabled, a read-only status does not.
func (e *Engine) prepareFor(ctx context.Context, c *ops.Cluster, mutating bool) (*site, *Status, error) {
	s, err := e.newSite(c)
	if err != nil {
		return nil, nil, err
	}
	pods, _, err := e.livePods(ctx, nil, s)
	if err != nil {
		return nil, nil, err
	}
	// Credentials first: with auth on, etcd answers endpoint status and
	// health only to an authenticated user.
	if err := e.checkAuth(ctx, s, pods, mutating); err != nil {
		return s, nil, err
	}
	st, err := s.ctl.fetchStatus(ctx, pods, "")
	if err != nil {
		return s, nil, err
	}
	if err := e.resolveTemplate(s, ops.StatefulSetOf(c.Groups[0]), st.Members); err != nil {
		return nil, nil, err
	}
	s.matchPods(st, maxOrdinalGuess(pods, st, s))
	if s.ctl.conn != nil && mutating {
		if err := s.ctl.conn.checkAdvertised(s.ns, st); err != nil {
			return s, st, err
		}
	}
	return s, st, nil
}

// Status reports members, leader, raft term/index, health and quorum.
func (e *Engine) Status(ctx context.Context, c *ops.Cluster) (*Status, error) {
	_, st, err := e.prepareFor(ctx, c, false)
	return st, err
}

// Health surfaces Status for `kubectl dbops status` and health gates.
func (e *Engine) Health(ctx context.Context, c *ops.Cluster) (*ops.Health, error) {
	st, err := e.Status(ctx, c)
	if err != nil {
		var coded *ops.CodedError
		if ctx.Err() != nil || errors.As(err, &coded) {
			// A refusal (credentials, TLS, spec mismatch) says what to do;
			// it is not a quorum verdict.
			return nil, err
		}
		return &ops.Health{Status: "no-quorum", Message: err.Error()}, nil
	}
	h := &ops.Health{Status: st.HealthStatus(), Message: st.Summary(), Details: map[string]string{
		"voters": strconv.Itoa(st.Voters), "learners": strconv.Itoa(st.Learners),
		"quorum": strconv.Itoa(st.Quorum), "healthyVoters": strconv.Itoa(st.HealthyVoters)}}
	h.Table = &ops.Table{Title: "Members", Columns: []string{"ID", "NAME", "POD", "PEER URL", "ROLE", "TERM", "INDEX", "HEALTH"}}
	for _, m := range st.Members {
		role := "voter"
		switch {
		case m.Leader:
			role = "leader"
		case m.Learner:
			role = "learner"
		}
		state := "healthy"
		if !m.Healthy {
			state = "unhealthy"
			if m.Error != "" {
				state += ": " + m.Error
			}
		}
		h.Table.Rows = append(h.Table.Rows, []string{m.ID, dashIfEmpty(m.Name), dashIfEmpty(m.Pod), strings.Join(m.PeerURLs, ","),
			role, strconv.FormatUint(m.RaftTerm, 10), strconv.FormatUint(m.RaftIndex, 10), state})
	}
	// By pod (ordinal order reads naturally); members without a pod last.
	slices.SortStableFunc(h.Table.Rows, func(a, b []string) int {
		if (a[2] == "-") != (b[2] == "-") {
			if a[2] == "-" {
				return 1
			}
			return -1
		}
		return strings.Compare(a[2], b[2])
	})
	return h, nil
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
