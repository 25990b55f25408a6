package ops

import (
	"context"
	"sync/atomic"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

type rulesFallback struct {
	n     atomic.Int64
	allow bool
}

func (c *rulesFallback) Allowed(context.Context, string, Permission) (bool, error) {
	c.n.Add(1)
	return c.allow, nil
}

func TestRulesReview(t *testing.T) {
	admin := []authorizationv1.ResourceRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}}
	narrow := []authorizationv1.ResourceRule{
		{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods"}},
		{Verbs: []string{"create"}, APIGroups: []string{""}, Resources: []string{"pods/exec"}},
		{Verbs: []string{"update"}, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"dbops-db"}},
		{Verbs: []string{"patch"}, APIGroups: []string{"apps"}, Resources: []string{"*/scale"}},
	}
	tests := []struct {
		name       string
		rules      []authorizationv1.ResourceRule
		incomplete bool
		p          Permission
		fallback   bool // the answer came from the fallback
	}{
		{"admin", admin, false, Permission{Verb: "delete", Resource: "pods"}, false},
		{"verb and resource", narrow, false, Permission{Verb: "get", Resource: "pods"}, false},
		{"subresource", narrow, false, Permission{Verb: "create", Resource: "pods", Subresource: "exec"}, false},
		{"subresource wildcard", narrow, false, Permission{Verb: "patch", Group: "apps", Resource: "statefulsets", Subresource: "scale"}, false},
		{"other verb", narrow, false, Permission{Verb: "delete", Resource: "pods"}, true},
		{"other group", narrow, false, Permission{Verb: "get", Group: "apps", Resource: "pods"}, true},
		{"names only", narrow, false, Permission{Verb: "update", Group: "coordination.k8s.io", Resource: "leases"}, true},
		{"incomplete rules", admin, true, Permission{Verb: "delete", Resource: "pods"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			var reviews atomic.Int64
			client.PrependReactor("create", "selfsubjectrulesreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
				reviews.Add(1)
				r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectRulesReview).DeepCopy()
				r.Status.ResourceRules, r.Status.Incomplete = tt.rules, tt.incomplete
				return true, r, nil
			})
			fb := &rulesFallback{allow: false}
			rr := &RulesReview{Client: client, Fallback: fb}
			for range 3 { // one review per namespace, however many questions
				ok, err := rr.Allowed(context.Background(), "prod", tt.p)
				if err != nil {
					t.Fatal(err)
				}
				if ok == tt.fallback {
					t.Fatalf("allowed %v, want %v", ok, !tt.fallback)
				}
			}
			if reviews.Load() != 1 {
				t.Fatalf("%d rules reviews, want 1", reviews.Load())
			}
			if got := fb.n.Load() > 0; got != tt.fallback {
				t.Fatalf("fallback asked: %v, want %v", got, tt.fallback)
			}
		})
	}
}
