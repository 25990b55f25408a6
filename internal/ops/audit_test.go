package ops

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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

// A transient API error and a name collision are retried (with a fresh name), so the event
// still lands, once.
func TestKubeAuditorRetries(t *testing.T) {
	client := fake.NewClientset()
	var names []string
	fails := []error{
		apierrors.NewServiceUnavailable("apiserver restarting"),
		apierrors.NewAlreadyExists(schema.GroupResource{Resource: "events"}, "x"),
	}
	client.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		names = append(names, a.(k8stesting.CreateAction).GetObject().(*corev1.Event).Name)
		if len(fails) > 0 {
			err := fails[0]
			fails = fails[1:]
			return true, nil, err
		}
		return false, nil, nil
	})
	a := &KubeAuditor{Client: client, Clock: stillClock{time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)}, Instance: "me"}
	obj := ObjectRef{Kind: "Pod", APIVersion: "v1", Namespace: "ns", Name: "web-0", UID: "u1"}
	if err := a.Record(context.Background(), obj, "DbopsRestartPod", "restarted"); err != nil {
		t.Fatal(err)
	}
	evs, _ := client.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
	if len(names) != 3 || len(evs.Items) != 1 || names[1] == names[2] {
		t.Errorf("tries %v, %d events stored; want 3 tries, the last two with different names, and 1 event", names, len(evs.Items))
	}
	if ok, err := a.Recorded(context.Background(), obj, "DbopsRestartPod"); err != nil || !ok {
		t.Errorf("Recorded = %v, %v; want true", ok, err)
	}
	if ok, _ := a.Recorded(context.Background(), ObjectRef{Namespace: "ns", UID: "u2"}, "DbopsRestartPod"); ok {
		t.Error("Recorded finds an event on another UID")
	}
}
