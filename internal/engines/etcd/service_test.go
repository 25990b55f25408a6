package etcd

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestScaleUpNeedsNotReadyAddresses: a learner fails /readyz, so its pod is never Ready; a
// headless Service without publishNotReadyAddresses never publishes its DNS name, and a
// scale-up through such peer URLs would hang: refused (exit 5, the Service and the field
// named, nothing written). With the field, a probe a learner passes, or peer URLs that are
// no DNS names of the Service, it plans.
func TestScaleUpNeedsNotReadyAddresses(t *testing.T) {
	readyz := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(2379)}}}
	tcp := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(2379)}}}
	const dnsTemplate = "http://{{.Pod}}.etcd-headless.db.svc.cluster.local:2380"
	for _, tc := range []struct {
		name     string
		probe    *corev1.Probe
		publish  bool
		template string
		want     string // refusal, "" when the plan is made
	}{
		{"readyz probe, field unset", readyz, false, dnsTemplate, "service/etcd-headless does not set publishNotReadyAddresses: true"},
		{"readyz probe, field set", readyz, true, dnsTemplate, ""},
		{"tcp probe a learner passes", tcp, false, dnsTemplate, ""},
		{"peer URLs by IP", readyz, false, "http://127.0.3.{{add .Ordinal 1}}:2380", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEtcd(3, 0)
			fx := newFixture(t, 3, f, func(c *corev1.Container, ann map[string]string) {
				c.ReadinessProbe = tc.probe
				ann[AnnotationPeerURLTemplate] = tc.template
			})
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "etcd-headless", Namespace: testNS},
				Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: tc.publish}}
			if _, err := fx.client.CoreV1().Services(testNS).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			fx.client.ClearActions()
			five := int32(5)
			_, err := fx.eng.PlanScale(context.Background(), fx.c, ops.ScaleRequest{Replicas: &five})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("plan: %v", err)
				}
				return
			}
			if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v (exit %d), want one line, exit 5, with %q", err, ops.ExitCode(err), tc.want)
			}
			if w := fakecluster.Writes(fx.client); len(w) != 0 {
				t.Errorf("refused request wrote %v", w)
			}
			if m := f.mutations(); len(m) != 0 {
				t.Errorf("refused request changed membership: %v", m)
			}
		})
	}
}
