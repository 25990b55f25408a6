package fdbsim

import (
	"testing"
	"time"
)

// dataState is cluster.data.state's name, healthy and min_replicas_remaining, and the primary
// team tracker's.
func dataState(t *testing.T, c *Cluster) (string, bool, float64) {
	t.Helper()
	m := status(t, c)
	st := path(m, "cluster", "data", "state").(map[string]any)
	tr := path(m, "cluster", "data", "team_trackers").([]any)[0].(map[string]any)["state"].(map[string]any)
	if tr["name"] != st["name"] || tr["min_replicas_remaining"] != st["min_replicas_remaining"] {
		t.Fatalf("team tracker %v, data state %v", tr, st)
	}
	return st["name"].(string), st["healthy"].(bool), st["min_replicas_remaining"].(float64)
}

// TestReplacementInAnUsedZone: triple keeps each team in three distinct zoneids. A replacement
// that lands in zone-b beside another storage server (zones b, b, c once zone-a's server is
// excluded) gives data distribution no team to move zone-a's data to: the exclusion never
// completes and the data is "healing", not healthy (the sandbox's run said succeeded, with
// data healthy and min_replicas_remaining 3). Removed anyway, only two zoneids hold the data:
// min_replicas_remaining 2. A storage server in a third zoneid lets the data move again.
func TestReplacementInAnUsedZone(t *testing.T) {
	clock := NewManualClock(t0)
	var specs []ProcessSpec
	for i, z := range []string{"zone-a", "zone-b", "zone-c"} {
		n := string(rune('1' + i))
		specs = append(specs,
			ProcessSpec{ID: "storage-" + n, Address: "10.0.1." + n + ":4501", Class: ClassStorage, Zone: z},
			ProcessSpec{ID: "log-" + n, Address: "10.0.2." + n + ":4501", Class: ClassLog, Zone: z},
			ProcessSpec{ID: "stateless-" + n, Address: "10.0.3." + n + ":4501", Class: ClassStateless, Zone: z})
	}
	c, err := New(clock, Config{RedundancyMode: "triple"}, specs, []string{"10.0.2.1:4501", "10.0.2.2:4501", "10.0.2.3:4501"})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if name, healthy, n := dataState(t, c); name != "healthy" || !healthy || n != 3 {
		t.Fatalf("start: %s %t %v", name, healthy, n)
	}
	// The replacement of storage-1 lands in zone-b.
	if err := c.AddProcess(ProcessSpec{ID: "storage-4", Address: "10.0.1.4:4501", Class: ClassStorage, Zone: "zone-b"}); err != nil {
		t.Fatal(err)
	}
	if r := run(c, "--exec", "exclude no_wait 10.0.1.1:4501"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	clock.Advance(time.Hour)
	if name, healthy, n := dataState(t, c); name != "healing" || healthy || n != 3 {
		t.Fatalf("exclusion with zones b, b, c left: %s %t %v, want healing false 3", name, healthy, n)
	}
	if !holdsData(t, c, "10.0.1.1:4501") {
		t.Fatal("storage-1 lost its data with no team to move it to")
	}
	if r := run(c, "--exec", "exclude 10.0.1.1:4501", "--timeout", "1"); r.code == 0 {
		t.Fatalf("the exclusion completed: %+v", r)
	}
	// Removed anyway (its data lost): two zoneids hold the data.
	if err := c.RemoveProcess("storage-1"); err != nil {
		t.Fatal(err)
	}
	if name, healthy, n := dataState(t, c); name != "healing" || healthy || n != 2 {
		t.Fatalf("storage in zones b, b, c only: %s %t %v, want healing false 2", name, healthy, n)
	}
	// A storage server in a third zoneid: teams again.
	if err := c.AddProcess(ProcessSpec{ID: "storage-5", Address: "10.0.1.5:4501", Class: ClassStorage, Zone: "zone-d"}); err != nil {
		t.Fatal(err)
	}
	if name, healthy, n := dataState(t, c); name != "healthy" || !healthy || n != 3 {
		t.Fatalf("zones b, b, c, d: %s %t %v", name, healthy, n)
	}
}

// TestStalledExclusionDrainsOnceTeamsCanBeBuilt: the data of an exclusion that could not move
// starts to move when a server in another zoneid arrives, taking DataMove from then.
func TestStalledExclusionDrainsOnceTeamsCanBeBuilt(t *testing.T) {
	c, clock := fixture(t) // double, storage in z1, z2, z3
	clock.Advance(time.Minute)
	if r := run(c, "--exec", "exclude no_wait 10.0.1.1:4501 10.0.1.2:4501"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	clock.Advance(time.Hour)
	if !holdsData(t, c, "10.0.1.1:4501") {
		t.Fatal("data moved with only z3 left")
	}
	if err := c.AddProcess(ProcessSpec{ID: "storage-9", Address: "10.0.1.9:4501", Class: ClassStorage, Zone: "z9"}); err != nil {
		t.Fatal(err)
	}
	status(t, c) // data distribution notices the new server now
	clock.Advance(c.cfg.DataMove / 2)
	if !holdsData(t, c, "10.0.1.1:4501") {
		t.Fatal("data moved before DataMove had passed since it could")
	}
	clock.Advance(c.cfg.DataMove)
	for _, a := range []string{"10.0.1.1:4501", "10.0.1.2:4501"} {
		if holdsData(t, c, a) {
			t.Fatalf("%s still holds data", a)
		}
	}
}

// holdsData: the process at address reports a storage role.
func holdsData(t *testing.T, c *Cluster, address string) bool {
	t.Helper()
	p := proc(status(t, c), address)
	if p == nil {
		t.Fatalf("no process %s", address)
	}
	for _, ro := range p["roles"].([]any) {
		if ro.(map[string]any)["role"] == "storage" {
			return true
		}
	}
	return false
}
