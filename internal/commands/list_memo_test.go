package commands

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
)

// listActions counts the client's list requests of resource.
func listActions(c *fake.Clientset, resource string) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

// One `list` of N clusters in one namespace lists the namespace's StatefulSets once and the
// nodes once (each cluster's discovery asked both again before), and prints every cluster's
// row as discovery reads it; a second `list` reads live again (the memo is one command's).
func TestListReadsEachCollectionOnce(t *testing.T) {
	const n = 5
	var objs []runtime.Object
	for i := range n {
		objs = append(objs, fakecluster.Objects("prod", fmt.Sprintf("db%d", i), "", webObjects()...)...)
	}
	h := newHarness(t, uniqueObjects(objs)...)
	for run := 1; run <= 2; run++ {
		h.client.ClearActions()
		r := h.run("list", "-n", "prod")
		if r.code != 0 {
			t.Fatalf("run %d: exit %d: %s", run, r.code, r.err)
		}
		if sts, nodes := listActions(h.client, "statefulsets"), listActions(h.client, "nodes"); sts != 1 || nodes != 1 {
			t.Errorf("run %d: %d StatefulSet lists and %d node lists for %d clusters, want 1 and 1", run, sts, nodes, n)
		}
		if pods := listActions(h.client, "pods"); pods != n {
			t.Errorf("run %d: %d pod lists, want %d (one per cluster, by its selector)", run, pods, n)
		}
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		if len(lines) != n+1 || strings.Join(strings.Fields(lines[0]), " ") != "NAME ENGINE GROUPS READY HEALTH LOCK UNFINISHED" {
			t.Fatalf("run %d: list -n prod:\n%s", run, r.out)
		}
		for i, l := range lines[1:] {
			if got, want := strings.Join(strings.Fields(l), " "), fmt.Sprintf("db%d generic web 3/3 3/3", i); !strings.HasPrefix(got, want) {
				t.Errorf("run %d: row %q, want it to start with %q", run, got, want)
			}
		}
	}
	if w := fakecluster.Writes(h.client); len(w) > 0 {
		t.Errorf("list wrote %v", w)
	}
}

// A fleet `list`: each target reads its namespace's StatefulSets and the nodes once.
func TestFleetListReadsEachCollectionOncePerContext(t *testing.T) {
	fh := newFleetHarness(t)
	r := fh.run("list", "--context", "ctx-a,ctx-b")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	for _, c := range []string{"ctx-a", "ctx-b"} {
		if sts, nodes := listActions(fh.clients[c], "statefulsets"), listActions(fh.clients[c], "nodes"); sts != 1 || nodes != 1 {
			t.Errorf("%s: %d StatefulSet lists and %d node lists, want 1 and 1", c, sts, nodes)
		}
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(r.out), "\n") {
		got = append(got, strings.Join(strings.Fields(l), " "))
	}
	want := []string{"CONTEXT NAME ENGINE GROUPS READY HEALTH LOCK UNFINISHED",
		"ctx-a orders generic web 3/3 3/3 - - -", "ctx-b orders generic web 3/3 3/3 - - -", "ctx-b users generic web 3/3 3/3 - - -"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("fleet list:\n%s", r.out)
	}
	fh.noWrites(t)
}

// The memo keeps only complete answers: a failed list, or the first page of a paged one, is
// asked again by the next request; continued pages always go to the API server.
func TestListMemoKeepsOnlyCompleteAnswers(t *testing.T) {
	c := fake.NewClientset()
	var calls, fail atomic.Int32
	cont := ""
	c.PrependReactor("list", "statefulsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		calls.Add(1)
		if fail.Load() > 0 {
			fail.Add(-1)
			return true, nil, errors.New("boom")
		}
		return true, &appsv1.StatefulSetList{ListMeta: metav1.ListMeta{Continue: cont}}, nil
	})
	k := memoizeLists(c)
	list := func(o metav1.ListOptions) error {
		_, err := k.AppsV1().StatefulSets("ns").List(context.Background(), o)
		return err
	}
	fail.Store(1)
	if err := list(metav1.ListOptions{}); err == nil {
		t.Fatal("the failure was not returned")
	}
	cont = "next"
	_ = list(metav1.ListOptions{}) // paged: not kept
	cont = ""
	_ = list(metav1.ListOptions{Limit: 500}) // complete: kept
	_ = list(metav1.ListOptions{})
	_ = list(metav1.ListOptions{LabelSelector: "a=b"}) // another request
	_ = list(metav1.ListOptions{Continue: "next"})     // a continued page
	if got := calls.Load(); got != 5 {
		t.Errorf("%d requests, want 5 (failed, paged, complete, other selector, continued page)", got)
	}
}

// A fleet target naming one cluster reads only that cluster's row (its pods, its lock), not
// those of every cluster of its namespace; a cluster it names that does not exist is that
// target's error (it was dropped without a word: the fleet list just lacked its row).
func TestFleetListTargetNamingOneCluster(t *testing.T) {
	fh := newFleetHarness(t)
	file := writeFleetFile(t, "targets:\n- context: ctx-b\n  clusters: [users]\n- context: ctx-a\n  clusters: [nope]\n")
	r := fh.run("list", "--fleet", file)
	if r.code != 2 || !strings.Contains(r.err, "ctx-a") || !strings.Contains(r.err, `named "nope"`) {
		t.Fatalf("exit %d, want 2 naming ctx-a's missing cluster: %s\n%s", r.code, r.err, r.out)
	}
	if got := strings.Join(strings.Fields(strings.Split(strings.TrimSpace(r.out), "\n")[1]), " "); got != "ctx-b users generic web 3/3 3/3 - - -" {
		t.Errorf("row %q:\n%s", got, r.out)
	}
	if pods := listActions(fh.clients["ctx-b"], "pods"); pods != 1 {
		t.Errorf("ctx-b: %d pod lists, want 1 (users only; orders is not a target)", pods)
	}
	if pods := listActions(fh.clients["ctx-a"], "pods"); pods != 0 {
		t.Errorf("ctx-a: %d pod lists, want none (its target names no cluster there)", pods)
	}
	fh.noWrites(t)
}

// With -l, list reads the StatefulSets once: the selection and every row's discovery share it.
func TestListSelectorReadsStatefulSetsOnce(t *testing.T) {
	var objs []runtime.Object
	for i := range 3 {
		objs = append(objs, fakecluster.Objects("prod", fmt.Sprintf("db%d", i), "", webObjects()...)...)
	}
	h := newHarness(t, uniqueObjects(objs)...)
	r := h.run("list", "-n", "prod", "-l", "!absent")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if sts := listActions(h.client, "statefulsets"); sts != 1 {
		t.Errorf("%d StatefulSet lists with -l, want 1", sts)
	}
	if n := len(strings.Split(strings.TrimSpace(r.out), "\n")); n != 4 {
		t.Errorf("%d lines, want a header and 3 rows:\n%s", n, r.out)
	}
}
