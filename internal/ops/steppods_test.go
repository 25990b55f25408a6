package ops

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
)

// TestGetPodsAsksAtOnce: outside a run, GetPods sends its GETs at the same time (each is
// answered only once all of them wait, or fails after the test's patience); a missing pod is
// absent from the result and a failed GET fails the call. Inside a run the informer answers
// and no GET is sent.
func TestGetPodsAsksAtOnce(t *testing.T) {
	names := []string{"db-0", "db-1", "db-2", "db-3", "gone"}
	var objs []runtime.Object
	for _, n := range names[:4] {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "prod", Labels: map[string]string{"app": "db"}}})
	}
	for _, tc := range []struct {
		name    string
		fail    string
		want    []string
		wantErr string
	}{
		{name: "all at once; a missing pod is absent", want: names[:4]},
		{name: "a failed GET fails the call", fail: "db-2", wantErr: "reading pod prod/db-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A real client against an API server stand-in: the fake clientset answers one
			// request at a time.
			var mu sync.Mutex
			waiting, all := 0, make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				name := path.Base(r.URL.Path)
				mu.Lock()
				if waiting++; waiting == len(names) {
					close(all)
				}
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				select {
				case <-all:
				case <-time.After(5 * time.Second):
					w.WriteHeader(http.StatusInternalServerError)
					_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"GETs were sent one after the other","code":500}`)
					return
				}
				switch {
				case name == tc.fail:
					w.WriteHeader(http.StatusInternalServerError)
					_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"boom","code":500}`)
				case !slices.Contains(names[:4], name):
					w.WriteHeader(http.StatusNotFound)
					_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
				default:
					_, _ = fmt.Fprintf(w, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":%q,"namespace":"prod"}}`, name)
				}
			}))
			defer srv.Close()
			client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: 100, Burst: 100})
			if err != nil {
				t.Fatal(err)
			}
			got, err := GetPods(t.Context(), nil, client, "prod", names)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("GetPods: %v, want %q", err, tc.wantErr)
				}
				return
			case err != nil:
				t.Fatalf("GetPods: %v", err)
			}
			if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, tc.want) {
				t.Errorf("GetPods returned %v, want %v", keys, tc.want)
			}
		})
	}

	t.Run("inside a run the informer answers", func(t *testing.T) {
		client := fake.NewClientset(objs...)
		pods := kube.StartPods(t.Context(), client, "prod", "", "")
		ctx := kube.WithPods(t.Context(), pods)
		got, err := GetPods(ctx, nil, client, "prod", names)
		if err != nil {
			t.Fatal(err)
		}
		if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, names[:4]) {
			t.Errorf("GetPods returned %v, want %v", keys, names[:4])
		}
		for _, a := range client.Actions() {
			if a.GetVerb() == "get" {
				t.Errorf("a GET inside a run: %v", a)
			}
		}
	})
}
