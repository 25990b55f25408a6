package ops

import (
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStatefulSetOwnerMember(t *testing.T) {
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db-data", UID: "u1"},
		Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}
	o := NewStatefulSetOwner(sts)
	pod := func(name, app string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}}}
	}
	for _, tt := range []struct {
		pod  *corev1.Pod
		ord  int
		want bool
	}{
		{pod("db-data-2", "db"), 2, true},
		{pod("db-data-2", "web"), -1, false},  // another selector's pod of the same name
		{pod("db-data-x-2", "db"), -1, false}, // another StatefulSet's pod
		{pod("db-data-02", "db"), -1, false},  // not a name the controller gives
		{pod("db-master-0", "db"), -1, false}, // a sibling group's pod
	} {
		if _, ord, ok := o.Member(tt.pod); ok != tt.want || ord != tt.ord {
			t.Errorf("%s: got (%d, %v), want (%d, %v)", tt.pod.Name, ord, ok, tt.ord, tt.want)
		}
	}
	if got := o.PodName(3); got != "db-data-3" {
		t.Errorf("PodName %q", got)
	}
	if ref := o.Ref("ns"); ref.Kind != "StatefulSet" || ref.Name != "db-data" || ref.UID != "u1" {
		t.Errorf("Ref %+v", ref)
	}
}

// The -o json document keeps "statefulSet" though the owner is one field.
func TestNodeGroupJSONKeepsStatefulSet(t *testing.T) {
	g := &NodeGroup{Name: "data", Owner: &StatefulSetOwner{Name: "db-data"}}
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"statefulSet":"db-data"`) || strings.Contains(string(b), `"controller"`) {
		t.Errorf("document %s", b)
	}
}
