package ops

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

type stillClock struct{ t time.Time }

func (c stillClock) Now() time.Time { return c.t }

// Events recorded on one object at the very same instant all land: names do not collide.
func TestKubeAuditorSameInstant(t *testing.T) {
	client := fake.NewClientset()
	a := &KubeAuditor{Client: client, Clock: stillClock{time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)}, Instance: "me"}
	obj := ObjectRef{Kind: "Pod", APIVersion: "v1", Namespace: "ns", Name: "web-0", UID: "u1"}
	for range 8 {
		if err := a.Record(context.Background(), obj, "DbopsRestartPod", "restarted"); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Record(context.Background(), ObjectRef{Warning: true, Kind: "StatefulSet", APIVersion: "apps/v1", Namespace: "ns", Name: "web"}, "DbopsOperationFailed", "x"); err != nil {
		t.Fatal(err)
	}
	evs, err := client.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 9 {
		t.Fatalf("%d events, want 9", len(evs.Items))
	}
	for _, e := range evs.Items {
		if e.Reason == "DbopsOperationFailed" && e.Type != "Warning" {
			t.Errorf("failed operation event has type %s, want Warning", e.Type)
		}
	}
}
