package replicated

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestRestartedContainerIsNoPrimary: the kubelet restarted db-0's container in place (same
// pod UID, label kept, restartCount up, a newer startedAt); the new process serves no role, so
// the label primary is not trusted and bootstrap promotes a primary again. A container that
// did not restart keeps its role.
func TestRestartedContainerIsNoPrimary(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		restarts  int32
		started   time.Time
		wantSteps bool
	}{
		{"container restarted in place", 1, t0.Add(time.Hour), true},
		{"same container run", 0, t0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 3, map[string]string{"db-0": RolePrimary, "db-1": RoleSecondary, "db-2": RoleSecondary}, testConfig)
			f.app.seq = map[string]string{"db-0": "9", "db-1": "5", "db-2": "3"}
			ctx := context.Background()
			for _, name := range []string{"db-0", "db-1", "db-2"} {
				p, err := f.client.CoreV1().Pods(testNS).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				p.Spec.Containers = []corev1.Container{{Name: "app", Image: "example/app:1"}}
				p.Annotations = map[string]string{AnnotationRoleIncarnation: "app:0:" + t0.Format(time.RFC3339)}
				restarts, started := int32(0), t0
				if name == "db-0" {
					restarts, started = tc.restarts, tc.started
				}
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, RestartCount: restarts,
					State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}
				if _, err := f.client.CoreV1().Pods(testNS).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			p, err := f.eng.PlanBootstrap(ctx, f.cluster(), BootstrapRequest{Primaries: ptr.To[int32](1)})
			if err != nil {
				t.Fatal(err)
			}
			if (len(p.Steps) > 0) != tc.wantSteps {
				t.Fatalf("plan has %d steps, want steps: %v\n%s", len(p.Steps), tc.wantSteps, planText(t, p))
			}
			if !tc.wantSteps {
				return
			}
			if !strings.Contains(strings.Join(p.Notes, "\n"), "not trusted: db-0 (label primary: container app restarted since the label was set (restartCount 0 -> 1))") {
				t.Errorf("notes do not say why db-0's label is not trusted: %q", p.Notes)
			}
			if err := f.run(p); err != nil {
				t.Fatal(err)
			}
			got, _ := f.client.CoreV1().Pods(testNS).Get(ctx, "db-0", metav1.GetOptions{})
			if got.Labels[LabelRole] != RolePrimary || got.Annotations[AnnotationRoleIncarnation] != "app:1:"+tc.started.Format(time.RFC3339) {
				t.Errorf("db-0 role %q incarnation %q after the bootstrap; want primary on the running container",
					got.Labels[LabelRole], got.Annotations[AnnotationRoleIncarnation])
			}
			if m := f.app.mutations(); len(m) == 0 || !strings.HasPrefix(m[0], "db-0: primary") && !strings.HasPrefix(m[0], "db-0: seed") {
				t.Errorf("commands %q; want db-0 (highest sequence) promoted again first", m)
			}
		})
	}
}
