//go:build e2e

package e2e

// End-to-end test of `replace --strategy replacement` for the replicated
// engine: the member is stopped, pod and PVC are recreated, and the new
// pod is given its former role back by the role commands.

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestReplaceReplicatedRolesRestored(t *testing.T) {
	a := newReplApp(t, "app", 3, 3, func(a *replApp) string { return a.config(2) })
	for o, v := range []string{"5", "4", "3"} {
		a.setSeq(o, v)
	}
	if r := a.run("bootstrap", "app"); r.Code != 0 {
		t.Fatalf("bootstrap: %s", r)
	}
	a.log()
	roles, _ := a.roles()
	if roles["app-0"] != "primary" || roles["app-1"] != "primary" || roles["app-2"] != "secondary" {
		t.Fatalf("roles after bootstrap = %v, want app-0 and app-1 primaries, app-2 secondary", roles)
	}

	for _, tc := range []struct {
		pod  string
		role string
		want []string
	}{
		{"app-2", "secondary", []string{"app-2 stop", "app-2 secondary " + a.dns(0, 1)}},
		{"app-0", "primary", []string{"app-0 stop", "app-0 primary " + a.dns(1)}},
	} {
		oldPVC := pvcUIDs(t, a.ns)["data-"+tc.pod]
		_, before := a.roles()
		r := a.run("replace", "app", tc.pod, "--strategy", "replacement")
		if r.Code != 0 {
			t.Fatalf("replace %s: %s", tc.pod, r)
		}
		if got := mutations(a.log()); !slices.Equal(got, tc.want) {
			t.Errorf("replace %s: commands = %q, want %q", tc.pod, got, tc.want)
		}
		a.waitReady(3)
		roles, after := a.roles()
		if roles[tc.pod] != tc.role {
			t.Errorf("replace %s: role %q, want %q (roles %v)", tc.pod, roles[tc.pod], tc.role, roles)
		}
		if after[tc.pod] == before[tc.pod] {
			t.Errorf("replace %s: pod UID unchanged", tc.pod)
		}
		if now := pvcUIDs(t, a.ns)["data-"+tc.pod]; now == "" || now == oldPVC {
			t.Errorf("replace %s: PVC uid %q before, %q after; want a new one", tc.pod, oldPVC, now)
		}
		for pod, uid := range before {
			if pod != tc.pod && after[pod] != uid {
				t.Errorf("replace %s: pod %s was recreated too", tc.pod, pod)
			}
		}
	}
	roles, _ = a.roles()
	if roles["app-0"] != "primary" || roles["app-1"] != "primary" || roles["app-2"] != "secondary" {
		t.Errorf("roles after both replacements = %v", roles)
	}
}

// The only primary is replaced and its stop fails: the replacement goes on,
// the empty new member loses the election to the secondary with the highest
// sequence number and comes back as a secondary of it.
func TestReplaceReplicatedOnlyPrimary(t *testing.T) {
	a := newReplApp(t, "app", 3, 3, func(a *replApp) string { return a.config(1) })
	for o, v := range []string{"5", "4", "3"} {
		a.setSeq(o, v)
	}
	if r := a.run("bootstrap", "app"); r.Code != 0 {
		t.Fatalf("bootstrap: %s", r)
	}
	a.log()
	a.failOn(0, "stop")
	// The new pod's volume is empty: it has no sequence number.
	if err := os.Remove(filepath.Join(a.state, a.pod(0), "seq")); err != nil {
		t.Fatal(err)
	}
	oldPVC := pvcUIDs(t, a.ns)["data-app-0"]
	r := a.run("replace", "app", "app-0")
	if r.Code != 0 {
		t.Fatalf("replace: %s", r)
	}
	want := []string{"app-0 stop", "app-1 seed", "app-0 secondary " + a.dns(1)}
	if got := mutations(a.log()); !slices.Equal(got, want) {
		t.Errorf("commands = %q, want %q", got, want)
	}
	a.waitReady(3)
	roles, _ := a.roles()
	if roles["app-0"] != "secondary" || roles["app-1"] != "primary" || roles["app-2"] != "secondary" {
		t.Errorf("roles = %v, want app-1 primary, app-0 and app-2 secondaries", roles)
	}
	if now := pvcUIDs(t, a.ns)["data-app-0"]; now == "" || now == oldPVC {
		t.Errorf("PVC data-app-0: uid %q before, %q after; want a new one", oldPVC, now)
	}
}
