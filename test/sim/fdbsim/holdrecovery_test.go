package fdbsim

import (
	"encoding/json"
	"testing"
	"time"
)

// TestHoldRecoveryWaitsAtAllLogsRecruited: a recovery that starts under HoldRecovery (a log
// stopped) accepts commits but stays at all_logs_recruited with two active generations and
// can_clean_bounce false, however long it runs; released, it is fully recovered. A cluster
// already fully recovered is not set back by the hold.
func TestHoldRecoveryWaitsAtAllLogsRecruited(t *testing.T) {
	c, clock := fixture(t)
	type doc struct {
		Client struct {
			DatabaseStatus struct{ Available bool } `json:"database_status"`
		} `json:"client"`
		Cluster struct {
			RecoveryState struct {
				Name              string `json:"name"`
				ActiveGenerations int    `json:"active_generations"`
			} `json:"recovery_state"`
			BounceImpact struct {
				CanCleanBounce bool `json:"can_clean_bounce"`
			} `json:"bounce_impact"`
		} `json:"cluster"`
	}
	read := func() doc {
		t.Helper()
		var d doc
		if err := json.Unmarshal(c.StatusJSON(), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	c.HoldRecovery(true)
	if d := read(); d.Cluster.RecoveryState.Name != "fully_recovered" {
		t.Fatalf("the hold set a recovered cluster back to %s", d.Cluster.RecoveryState.Name)
	}
	var log string
	for _, p := range c.Processes() {
		for _, r := range p.Roles {
			if r == "log" && log == "" {
				log = p.ID
			}
		}
	}
	if err := c.Stop(log); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	d := read()
	if !d.Client.DatabaseStatus.Available || d.Cluster.RecoveryState.Name != "all_logs_recruited" ||
		d.Cluster.RecoveryState.ActiveGenerations != 2 || d.Cluster.BounceImpact.CanCleanBounce {
		t.Fatalf("held recovery: %+v", d)
	}
	c.HoldRecovery(false)
	if d := read(); d.Cluster.RecoveryState.Name != "fully_recovered" || d.Cluster.RecoveryState.ActiveGenerations != 1 || !d.Cluster.BounceImpact.CanCleanBounce {
		t.Fatalf("released recovery: %+v", d)
	}
}
