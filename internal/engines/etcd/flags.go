package etcd

import (
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Flags are the etcd engine's command-line flags (config keys and DBOPS_* variables of the
// same names), bound per verb by AddFlags. Empty values mean "read it from the StatefulSet".
type Flags struct {
	Options
}

// AddFlags binds the engine's settings for every verb that talks to etcd.
func (o *Flags) AddFlags(verb string, fs *pflag.FlagSet) {
	switch verb {
	case "status", "wait", "explain", "report", "restart", "replace", "scale":
	default:
		return
	}
	fs.StringVar(&o.Container, "etcd-container", o.Container, "etcd: container to run etcdctl in (default: the one named etcd, else the one whose image mentions etcd)")
	fs.StringVar(&o.Endpoint, "etcd-endpoint", o.Endpoint, "etcd: etcdctl --endpoints inside the pod (default: from the member's --listen-client-urls/--advertise-client-urls)")
	fs.StringVar(&o.CACert, "etcd-cacert", o.CACert, "etcd: CA file inside the etcd container (default: its --trusted-ca-file)")
	fs.StringVar(&o.Cert, "etcd-cert", o.Cert, "etcd: client certificate file inside the etcd container (default: ETCDCTL_CERT, else its --cert-file; needed with --client-cert-auth)")
	fs.StringVar(&o.Key, "etcd-key", o.Key, "etcd: client key file inside the etcd container (with --etcd-cert)")
	fs.StringVar(&o.AuthSecret, "etcd-auth-secret", o.AuthSecret, "etcd: Secret NAME[/KEY] with the root password of a cluster with auth enabled (default key "+DefaultAuthPasswordKey+", user in key "+DefaultAuthUserKey+", else root; default: the Bitnami chart's ETCD_ROOT_PASSWORD Secret); sent to etcdctl on stdin only")
	fs.StringVar(&o.User, "etcd-user", o.User, "etcd: user to authenticate as with --etcd-auth-secret (default: the Secret's "+DefaultAuthUserKey+" key, else root)")
	fs.StringVar(&o.PeerURLTemplate, "etcd-peer-url-template", o.PeerURLTemplate, "etcd: peer URL of a pod, a Go template over .Pod .Ordinal .StatefulSet .Service .Namespace (default: annotation "+AnnotationPeerURLTemplate+", else derived from the members)")
	fs.StringVar(&o.ConfigMap, "etcd-cluster-state-configmap", o.ConfigMap, "etcd: ConfigMap new members read ETCD_INITIAL_CLUSTER from (default: annotation "+AnnotationConfigMap+", else found in the pod spec)")
	fs.DurationVar(&o.PollInterval, "etcd-poll-interval", o.PollInterval, "etcd: how often to re-check etcd's own conditions (learner in sync, member caught up); 0 = 1s")
	fs.Uint64Var(&o.MaxLag, "etcd-max-lag", o.MaxLag, "etcd: raft entries a learner or restarted member may trail the leader and count as caught up; 0 = 100")
}

// Validate checks the flags without touching the API.
func (o *Flags) Validate(func(string) bool) error {
	if o.PollInterval < 0 {
		return ops.Usagef("--etcd-poll-interval must not be negative (got %s)", o.PollInterval)
	}
	if o.PollInterval > 0 && o.PollInterval < 100*time.Millisecond {
		return ops.Usagef("--etcd-poll-interval must be at least 100ms (got %s)", o.PollInterval)
	}
	if (o.Cert == "") != (o.Key == "") {
		return ops.Usagef("--etcd-cert and --etcd-key go together")
	}
	if name, key, ok := strings.Cut(o.AuthSecret, "/"); o.AuthSecret != "" && (name == "" || (ok && key == "") || strings.Contains(key, "/")) {
		return ops.Usagef("--etcd-auth-secret must be NAME or NAME/KEY, got %q", o.AuthSecret)
	}
	if o.User != "" && strings.Contains(o.User, ":") {
		return ops.Usagef("--etcd-user must not contain ':' (etcdctl's --user would split it), got %q", o.User)
	}
	if o.PeerURLTemplate != "" {
		if _, err := ParsePeerURLTemplate(o.PeerURLTemplate); err != nil {
			return err
		}
	}
	return nil
}
