package kube

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestRequestKey(t *testing.T) {
	for _, tc := range []struct{ method, url, want string }{
		{"GET", "/api/v1/namespaces/ns/pods", "list pods"},
		{"GET", "/api/v1/namespaces/ns/pods?watch=true&labelSelector=a%3Db", "watch pods"},
		{"GET", "/api/v1/namespaces/ns/pods/web-0", "get pods"},
		{"DELETE", "/api/v1/namespaces/ns/pods/web-0", "delete pods"},
		{"POST", "/api/v1/namespaces/ns/pods/web-0/exec?command=x", "create pods/exec"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/dbops-web", "update leases"},
		{"PATCH", "/apis/apps/v1/namespaces/ns/statefulsets/web", "patch statefulsets"},
		{"GET", "/api/v1/nodes/n1", "get nodes"},
		{"GET", "/api/v1/nodes", "list nodes"},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "create selfsubjectaccessreviews"},
		{"DELETE", "/api/v1/namespaces/ns/pods", "deletecollection pods"},
		{"GET", "/version", "get /version"},
	} {
		r := httptest.NewRequest(tc.method, tc.url, nil)
		if got := RequestKey(r); got != tc.want {
			t.Errorf("%s %s: got %q, want %q", tc.method, tc.url, got, tc.want)
		}
	}
}

func TestRequestCounterCounts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	c := &RequestCounter{}
	client := &http.Client{Transport: c.WrapTransport(http.DefaultTransport)}
	for _, p := range []string{"/api/v1/namespaces/ns/pods", "/api/v1/namespaces/ns/pods", "/api/v1/namespaces/ns/pods/a"} {
		resp, err := client.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	snap := c.Snapshot()
	if snap["list pods"] != 2 || snap["get pods"] != 1 || snap["total"] != 3 {
		t.Fatalf("snapshot = %v", snap)
	}
	if got, want := c.String(), "total 3: get pods=1, list pods=2"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}
