package foundationdb

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// SetSkip records the pause's owner and lock expiry on the resource in the same write, and
// clearing the pause removes the record.
func TestSetSkipRecordsThePause(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.foundationdb.org/v1beta2", "kind": "FoundationDBCluster",
		"metadata": map[string]any{"name": "myfdb", "namespace": "demo", "resourceVersion": "7"},
		"spec":     map[string]any{},
	}}
	dyn := fakeCRClient(u)
	until := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	get := func() *unstructured.Unstructured {
		got, err := dyn.Resource(ClusterGVR).Namespace("demo").Get(context.Background(), "myfdb", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if changed, err := SetSkip(context.Background(), dyn, "demo", "myfdb", true, Pause{Paused: true, By: "alice@ws", Until: until}); err != nil || !changed {
		t.Fatalf("pause: %v %v", changed, err)
	}
	if p := ReadPause(get()); !p.Paused || p.By != "alice@ws" || !p.Until.Equal(until) {
		t.Fatalf("read back %+v", p)
	}
	if changed, err := SetSkip(context.Background(), dyn, "demo", "myfdb", false, Pause{}); err != nil || !changed {
		t.Fatalf("resume: %v %v", changed, err)
	}
	if got := get(); ReadPause(got).Paused || got.GetAnnotations()[AnnotationPause] != "" {
		t.Fatalf("after resume: %v", got.Object)
	}
}

// A paused operator (spec.skip) refuses a restart naming the pause, its owner and whether its
// lock expired, with the exact command that ends it; status shows the same.
func TestPausedOperatorIsNamedWithItsResumeCommand(t *testing.T) {
	expired := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	for _, tt := range []struct {
		name, note string
		want       []string
	}{
		{"paused by this tool, lock expired", `{"by":"alice@ws","until":"` + expired.Format(time.RFC3339) + `"}`, []string{
			"the operator is paused (spec.skip true, set by lock acquire --pause-operator as alice@ws; that lock expired at " + expired.Format(time.RFC3339) + ", the pause did not)",
			"resume it with: kubectl dbops lock release myfdb -n demo --id alice@ws"}},
		{"paused by someone else", "", []string{
			"the operator is paused (spec.skip true, not set by this tool)",
			`resume it with: kubectl patch foundationdbcluster myfdb -n demo --type merge -p '{"spec":{"skip":null}}'`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, model, e := liveCluster(t, 3, 3)
			u := Resource(c)
			if err := unstructured.SetNestedField(u.Object, true, "spec", "skip"); err != nil {
				t.Fatal(err)
			}
			if tt.note != "" {
				u.SetAnnotations(map[string]string{AnnotationPause: tt.note})
			}
			p, err := e.PlanRestart(context.Background(), c, ops.RestartOptions{Mode: ops.ModeZone})
			if err == nil {
				err = p.Preflight(context.Background(), ops.PreflightState{})
			}
			if ops.ExitCode(err) != ops.ExitPrecondition {
				t.Fatalf("got %v, want a refusal", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("refusal %q lacks %q", err, w)
				}
			}
			if got := mutations(model); len(got) != 0 {
				t.Fatalf("refusal ran %q", got)
			}
			h, err := e.Health(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(h.Message, "operator paused") || !strings.Contains(h.Details["operatorSkip"], tt.want[0]) ||
				!strings.Contains(h.Details["operatorSkip"], strings.TrimPrefix(tt.want[1], "resume it with: ")) {
				t.Fatalf("health %q %q", h.Message, h.Details["operatorSkip"])
			}
		})
	}
}
