package foundationdb

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// healthyStatus is a triple-redundancy cluster's status json in the shape of FoundationDB's
// mr-status-json-schemas.rst.inc (the fields the gate reads), fit for a restart.
const healthyStatus = `{
  "client": {
    "coordinators": {
      "coordinators": [
        {"address": "10.0.0.1:4501", "reachable": true},
        {"address": "10.0.0.2:4501", "reachable": true},
        {"address": "10.0.0.3:4501", "reachable": true}
      ],
      "quorum_reachable": true
    },
    "database_status": {"available": true, "healthy": true},
    "messages": []
  },
  "cluster": {
    "generation": 4,
    "database_available": true,
    "recovery_state": {"name": "fully_recovered", "active_generations": 1, "description": "Recovery complete."},
    "configuration": {"redundancy_mode": "triple", "log_replicas": 3},
    "data": {
      "state": {"name": "healthy", "healthy": true, "min_replicas_remaining": 3},
      "moving_data": {"in_flight_bytes": 0, "in_queue_bytes": 0},
      "team_trackers": [
        {"primary": true, "state": {"name": "healthy", "healthy": true, "min_replicas_remaining": 3}}
      ]
    },
    "logs": [
      {"current": true, "log_replication_factor": 3, "log_fault_tolerance": 2,
       "remote_log_replication_factor": 0, "remote_log_fault_tolerance": 0}
    ],
    "fault_tolerance": {"max_zone_failures_without_losing_data": 2, "max_zone_failures_without_losing_availability": 2},
    "bounce_impact": {"can_clean_bounce": true},
    "messages": []
  }
}`

// statusWith is healthyStatus with change applied to its decoded JSON.
func statusWith(t *testing.T, change func(doc map[string]any)) *Status {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(healthyStatus), &doc); err != nil {
		t.Fatal(err)
	}
	if change != nil {
		change(doc)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var st Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

// obj walks doc down path (objects only).
func obj(doc map[string]any, path ...string) map[string]any {
	for _, k := range path {
		doc = doc[k].(map[string]any)
	}
	return doc
}

// TestCheckStatusRefusals: each state the restart gate refuses, one at a time on an otherwise
// healthy status json, is refused with its own reason (exit 5); the healthy status passes.
// Each case is the only one that reaches its check, so removing any check fails its case
// (hack/mutate proves it).
func TestCheckStatusRefusals(t *testing.T) {
	tests := []struct {
		name   string
		change func(doc map[string]any)
		own    string // a maintenance zone this run holds
		want   string // "" = passes
	}{
		{name: "healthy"},
		{name: "unavailable", change: func(d map[string]any) {
			obj(d, "client", "database_status")["available"] = false
			obj(d, "client")["messages"] = []any{map[string]any{"name": "unreachable_master", "description": "Unable to locate the master."}}
		}, want: "is unavailable (Unable to locate the master.)"},
		{name: "someone else's maintenance zone", change: func(d map[string]any) {
			obj(d, "cluster")["maintenance_zone"] = "zone-c"
			obj(d, "cluster")["maintenance_seconds_remaining"] = 250.0
		}, want: "zone zone-c is in maintenance, set by someone else (250 seconds remaining)"},
		{name: "own maintenance zone", change: func(d map[string]any) {
			obj(d, "cluster")["maintenance_zone"] = "zone-c"
		}, own: "zone-c"},
		{name: "too many active generations", change: func(d map[string]any) {
			obj(d, "cluster", "recovery_state")["active_generations"] = 11
		}, want: "has 11 active generations (more than 10)"},
		{name: "recovering", change: func(d map[string]any) {
			obj(d, "cluster", "recovery_state")["name"] = "accepting_commits"
		}, want: "is recovering (accepting_commits)"},
		{name: "cannot bounce cleanly", change: func(d map[string]any) {
			obj(d, "cluster")["bounce_impact"] = map[string]any{"can_clean_bounce": false, "reason": "cluster hasn't been up long enough"}
		}, want: "cannot bounce cleanly (cluster hasn't been up long enough)"},
		{name: "no team trackers", change: func(d map[string]any) {
			obj(d, "cluster", "data")["team_trackers"] = []any{}
		}, want: "reports no team trackers"},
		{name: "a storage replica down", change: func(d map[string]any) {
			tr := obj(d, "cluster", "data")["team_trackers"].([]any)[0].(map[string]any)
			tr["state"] = map[string]any{"name": "healing", "healthy": false, "min_replicas_remaining": 2}
		}, want: "has min_replicas_remaining 2, below the configured 3 (data healing)"},
		{name: "no logs", change: func(d map[string]any) {
			obj(d, "cluster")["logs"] = []any{}
		}, want: "reports no log servers"},
		{name: "a log down", change: func(d map[string]any) {
			obj(d, "cluster")["logs"].([]any)[0].(map[string]any)["log_fault_tolerance"] = 1
		}, want: "log fault tolerance is 1, below replication 3 - 1"},
		{name: "a remote log down", change: func(d map[string]any) {
			l := obj(d, "cluster")["logs"].([]any)[0].(map[string]any)
			l["remote_log_replication_factor"] = 3
			l["remote_log_fault_tolerance"] = 1
		}, want: "remote log fault tolerance is 1, below replication 3 - 1"},
		{name: "remote logs healthy", change: func(d map[string]any) {
			l := obj(d, "cluster")["logs"].([]any)[0].(map[string]any)
			l["remote_log_replication_factor"] = 3
			l["remote_log_fault_tolerance"] = 2
		}},
		{name: "a satellite log down", change: func(d map[string]any) {
			l := obj(d, "cluster")["logs"].([]any)[0].(map[string]any)
			l["satellite_log_replication_factor"] = 3
			l["satellite_log_fault_tolerance"] = 1
		}, want: "satellite log fault tolerance is 1, below replication 3 - 1"},
		{name: "satellite logs healthy", change: func(d map[string]any) {
			l := obj(d, "cluster")["logs"].([]any)[0].(map[string]any)
			l["satellite_log_replication_factor"] = 3
			l["satellite_log_fault_tolerance"] = 2
		}},
		{name: "coordinator quorum unreachable", change: func(d map[string]any) {
			obj(d, "client", "coordinators")["quorum_reachable"] = false
		}, want: "the coordinators' quorum is not reachable"},
		{name: "a coordinator unreachable", change: func(d map[string]any) {
			obj(d, "client", "coordinators")["coordinators"].([]any)[1].(map[string]any)["reachable"] = false
		}, want: "coordinator 10.0.0.2:4501 of demo/myfdb is unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &gate{c: &ops.Cluster{Name: "myfdb", Namespace: "demo"}, replicas: 3}
			err := g.checkStatus(statusWith(t, tt.change), tt.own)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want == "":
			case err == nil:
				t.Fatalf("passed, want a refusal with %q", tt.want)
			case ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "refusing"):
				t.Fatalf("got %v (exit %d), want exit %d with %q", err, ops.ExitCode(err), ops.ExitPrecondition, tt.want)
			}
		})
	}
}
