package commands

import (
	"strings"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// `wait` exits 0 once its condition holds, 4 at its timeout naming what is missing, 2 for a
// condition it does not know; it never writes.
func TestWait(t *testing.T) {
	held := heldLease("prod", "db", "bob@elsewhere", "s1", "restart --rolling", "INC-1")
	for _, tc := range []struct {
		name    string
		args    []string
		lease   *coordinationv1.Lease
		release bool // the holder releases the lock after wait's first read
		code    int
		out     string // in stdout
		errOut  string // in stderr
	}{
		{name: "ready", args: []string{"--for=ready"}, code: 0, out: "prod/db is ready"},
		{name: "healthy without engine health", args: []string{"--for=healthy"}, code: 0, out: "prod/db is healthy"},
		{name: "unlocked, free", args: []string{"--for=unlocked"}, code: 0, out: "prod/db is unlocked"},
		{name: "unlocked once released", args: []string{"--for=unlocked"}, lease: held, release: true, code: 0,
			out: "prod/db is unlocked", errOut: "waiting for prod/db to be unlocked: locked by bob@elsewhere (restart --rolling)"},
		{name: "locked at the timeout", args: []string{"--for=unlocked", "--timeout", "1s"}, lease: held, code: ops.ExitTimeout,
			errOut: "db is not unlocked after 1s: locked by bob@elsewhere"},
		{name: "unknown condition", args: []string{"--for=green"}, code: ops.ExitUsage, errOut: `unknown --for "green"; allowed: ready, healthy, unlocked`},
		{name: "no condition", code: ops.ExitUsage, errOut: "wait needs --for; allowed: ready, healthy, unlocked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := fakecluster.Objects("prod", "db", "", webObjects()...)
			if tc.lease != nil {
				objs = append(objs, tc.lease.DeepCopy())
			}
			h := newHarness(t, objs...)
			if tc.release {
				var once sync.Once
				h.client.PrependReactor("get", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
					obj, err := h.client.Tracker().Get(coordinationv1.SchemeGroupVersion.WithResource("leases"), "prod", lock.LeaseName("db"))
					if err != nil {
						return true, nil, err
					}
					once.Do(func() {
						l := obj.(*coordinationv1.Lease).DeepCopy()
						l.Spec.HolderIdentity = nil
						go func() {
							_ = h.client.Tracker().Update(coordinationv1.SchemeGroupVersion.WithResource("leases"), l, "prod")
						}()
					})
					return true, obj, nil
				})
			}
			h.client.ClearActions()
			r := h.run(append([]string{"wait", "db", "-n", "prod"}, tc.args...)...)
			if r.code != tc.code || !strings.Contains(r.out, tc.out) || !strings.Contains(r.err, tc.errOut) {
				t.Fatalf("exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)", r.code, tc.code, r.out, tc.out, r.err, tc.errOut)
			}
			if w := fakecluster.Writes(h.client); len(w) > 0 {
				t.Errorf("wait wrote %v", w)
			}
		})
	}
}
