package etcd

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// learnerUnready describes the readiness probe of c when a learner fails it, "" when it
// passes (or there is none). etcd answers /readyz and /health from a member that serves
// linearizable reads, which a learner does not, and etcdctl endpoint health is such a read; a
// TCP probe or /livez only sees the process.
func learnerUnready(c *corev1.Container) string {
	p := c.ReadinessProbe
	if p == nil {
		return ""
	}
	switch {
	case p.TCPSocket != nil:
		return ""
	case p.HTTPGet != nil:
		if strings.HasPrefix(p.HTTPGet.Path, "/livez") {
			return ""
		}
		return "httpGet " + p.HTTPGet.Path
	case p.Exec != nil:
		return "exec " + strings.Join(p.Exec.Command, " ")
	case p.GRPC != nil:
		return "grpc"
	}
	return ""
}

// checkPeerDNS refuses a scale-up that would hang (docs/procedures.md, etcd, "Scale up"): a
// learner's pod is never Ready under a readiness probe it fails, and a headless Service
// publishes DNS records only for Ready pods unless publishNotReadyAddresses is set, so a peer
// URL under that Service never resolves: the leader cannot send the learner its snapshot and
// nothing reaches it (aenix etcd-operator sets the field on its headless Service for this
// reason). Peer URLs that do not name the Service (IPs, another domain) are not affected.
func (e *Engine) checkPeerDNS(ctx context.Context, s *site, sts *appsv1.StatefulSet, ordinal int) error {
	u, err := s.peerURL(ordinal)
	if err != nil {
		return err
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return nil
	}
	host := parsed.Hostname()
	if !strings.Contains(host+".", "."+s.service+".") {
		return nil
	}
	probe := learnerUnready(etcdContainer(sts, e.Options.Container))
	if probe == "" {
		return nil
	}
	svc, err := e.Client.CoreV1().Services(s.ns).Get(ctx, s.service, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil // no Service: the names do not resolve for anyone; not this check's to judge
	case err != nil:
		return fmt.Errorf("reading service %s/%s: %w", s.ns, s.service, err)
	}
	if svc.Spec.PublishNotReadyAddresses {
		return nil
	}
	return ops.Refusef(ops.ReasonPreconditionFailed, "cannot add etcd member %s: service/%s does not set publishNotReadyAddresses: true and the pods' readiness probe (%s) fails for a learner, so %s would never resolve and the learner could not catch up; set spec.publishNotReadyAddresses: true on service/%s first",
		s.podName(ordinal), s.service, probe, host, s.service)
}
