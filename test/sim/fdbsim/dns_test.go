package fdbsim

import (
	"fmt"
	"strings"
	"testing"
)

// TestDNSCoordinators: a cluster file naming coordinators by hostname. status json lists the
// hostnames in client.coordinators and gives the coordinator role to the processes they
// resolve to; a process back at a new IP stays a coordinator once DNS serves its new IP (and
// is unreachable while DNS still has the old one); `coordinators` takes hostnames and needs a
// running process behind each; an unknown hostname makes no coordinator.
func TestDNSCoordinators(t *testing.T) {
	clock := NewManualClock(t0)
	host := func(id string) string { return "myfdb-" + id + ".myfdb.demo.svc.cluster.local" }
	var specs []ProcessSpec
	dns := map[string]string{}
	for i, z := range []string{"z1", "z2", "z3"} {
		for j, class := range []string{ClassStorage, ClassLog, ClassStateless} {
			id := fmt.Sprintf("%s-%d", class, i+1)
			ip := fmt.Sprintf("10.0.%d.%d", j+1, i+1)
			specs = append(specs, ProcessSpec{ID: id, Address: ip + ":4501", Class: class, Zone: z})
			dns[host(id)] = ip
		}
	}
	coords := []string{host("storage-1") + ":4501", host("storage-2") + ":4501", host("log-3") + ":4501"}
	if _, err := New(clock, Config{}, specs, []string{"nowhere.example:4501"}); err == nil {
		t.Fatal("a hostname nobody resolves became a coordinator")
	}
	c, err := New(clock, Config{DNS: dns}, specs, coords)
	if err != nil {
		t.Fatal(err)
	}
	if cs := c.ConnectionString(); !strings.HasSuffix(cs, "@"+strings.Join(coords, ",")) {
		t.Fatalf("connection string %s", cs)
	}
	check := func(wantReachable bool, coordAddrs ...string) {
		t.Helper()
		m := status(t, c)
		list, _ := path(m, "client", "coordinators", "coordinators").([]any)
		if len(list) != 3 {
			t.Fatalf("client.coordinators %v", list)
		}
		for i, e := range list {
			em := e.(map[string]any)
			if em["address"] != coords[i] {
				t.Fatalf("client.coordinators[%d] %v, want the cluster file's %s", i, em["address"], coords[i])
			}
		}
		if r := list[0].(map[string]any)["reachable"]; r != wantReachable {
			t.Fatalf("first coordinator reachable %v, want %v", r, wantReachable)
		}
		n := 0
		for _, p := range path(m, "cluster", "processes").(map[string]any) {
			pm := p.(map[string]any)
			for _, r := range pm["roles"].([]any) {
				if r.(map[string]any)["role"] == "coordinator" {
					n++
					found := false
					for _, a := range coordAddrs {
						found = found || pm["address"] == a
					}
					if !found {
						t.Fatalf("coordinator role on %v", pm["address"])
					}
				}
			}
		}
		if n != len(coordAddrs) {
			t.Fatalf("%d processes hold the coordinator role, want %d", n, len(coordAddrs))
		}
	}
	check(true, "10.0.1.1:4501", "10.0.1.2:4501", "10.0.2.3:4501")

	// storage-1's pod comes back at a new IP: unreachable until DNS has it.
	if err := c.Stop("storage-1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Start("storage-1", "10.0.9.9:4501"); err != nil {
		t.Fatal(err)
	}
	check(false, "10.0.1.2:4501", "10.0.2.3:4501")
	dns[host("storage-1")] = "10.0.9.9"
	c.SetDNS(dns)
	check(true, "10.0.9.9:4501", "10.0.1.2:4501", "10.0.2.3:4501")

	// coordinators by hostname.
	if r := run(c, "--exec", "coordinators "+host("storage-3")+":4501 nobody.example:4501 "+host("log-1")+":4501"); r.code == 0 ||
		!strings.Contains(r.stderr, "not running on the specified network addresses") {
		t.Fatalf("an unresolved hostname: %+v", r)
	}
	next := host("storage-3") + ":4501 " + host("storage-2") + ":4501 " + host("log-1") + ":4501"
	if r := run(c, "--exec", "coordinators "+next); r.code != 0 || !strings.Contains(r.stdout, "Coordination state changed") {
		t.Fatalf("coordinators by hostname: %+v", r)
	}
	if got := strings.Join(c.Coordinators(), " "); got != next {
		t.Fatalf("coordinators %s", got)
	}
}
