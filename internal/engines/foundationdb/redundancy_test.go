package foundationdb

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// TestRedundancyArithmetic: storage team size, log replicas and tolerated fault domains per
// mode, as fdbclient/ManagementAPI.cpp configForToken and
// DatabaseConfiguration::maxZoneFailuresTolerated define them.
func TestRedundancyArithmetic(t *testing.T) {
	for _, tc := range []struct {
		mode                  string
		storageCfg, logCfg    int
		sats                  []satellite
		regions               int
		storage, logs, faults int
		known                 bool
	}{
		{mode: "single", storage: 1, logs: 1, faults: 0, known: true},
		{mode: "double", storage: 2, logs: 2, faults: 1, known: true},
		{mode: "", storage: 2, logs: 2, faults: 1, known: true},
		{mode: "triple", storage: 3, logs: 3, faults: 2, known: true},
		{mode: "three_data_hall", storage: 3, logs: 4, faults: 2, known: true},
		{mode: "three_data_hall_fallback", storage: 2, logs: 4, faults: 1, known: true},
		{mode: "three_datacenter", storage: 6, logs: 4, faults: 3, known: true},
		{mode: "three_datacenter_fallback", storage: 4, logs: 4, faults: 3, known: true},
		{mode: "", storageCfg: 3, logCfg: 2, storage: 3, logs: 2, faults: 1, known: true},
		// Satellite logs are synchronous: one region in use, log replicas + satellite - 1.
		{mode: "double", sats: []satellite{satelliteOf("one_satellite_double", 0, 0, 0, 0)}, regions: 1, storage: 2, logs: 2, faults: 1, known: true},
		{mode: "triple", sats: []satellite{satelliteOf("one_satellite_double", 0, 0, 0, 0)}, regions: 1, storage: 3, logs: 3, faults: 2, known: true},
		// Two usable regions: 1 + min(max(logs-1, satellite-1), storage-1).
		{mode: "double", sats: []satellite{satelliteOf("one_satellite_double", 0, 0, 0, 0), satelliteOf("one_satellite_double", 0, 0, 0, 0)}, regions: 2,
			storage: 2, logs: 2, faults: 2, known: true},
		{mode: "triple", sats: []satellite{satelliteOf("two_satellite_fast", 0, 0, 0, 0), satelliteOf("two_satellite_fast", 0, 0, 0, 0)}, regions: 2,
			storage: 3, logs: 3, faults: 3, known: true},
		// A region without satellites is the worst: no satellite term.
		{mode: "triple", sats: []satellite{satelliteOf("one_satellite_triple", 0, 0, 0, 0), {}}, regions: 2, storage: 3, logs: 3, faults: 2, known: true},
		{mode: "something_new", storage: 2, logs: 2, faults: 1},
	} {
		t.Run(fmt.Sprintf("%s/%d-%d/%d-regions/%d-sats", tc.mode, tc.storageCfg, tc.logCfg, tc.regions, len(tc.sats)), func(t *testing.T) {
			r, known := redundancyFor(tc.mode, tc.storageCfg, tc.logCfg, tc.sats, tc.regions)
			if r.StorageReplicas != tc.storage || r.LogReplicas != tc.logs || r.FaultTolerance != tc.faults || known != tc.known {
				t.Fatalf("got %+v known %t, want storage %d logs %d faults %d known %t", r, known, tc.storage, tc.logs, tc.faults, tc.known)
			}
		})
	}
}

// statusOf is a status json of storage processes (one per instance, zone given) under mode,
// every team tracker at minReplicas.
func statusOf(t *testing.T, mode string, minReplicas int, zones map[string]string, extra string) *Status {
	t.Helper()
	var procs []string
	i := 0
	for id, z := range zones {
		i++
		procs = append(procs, fmt.Sprintf(`"p%d":{"address":"10.0.0.%d:4501","class_type":"storage","locality":{"instance_id":%q,"zoneid":%q},"roles":[{"role":"storage"}]}`, i, i, id, z))
	}
	js := fmt.Sprintf(`{"client":{"database_status":{"available":true,"healthy":true}},"cluster":{"configuration":{"redundancy_mode":%q%s},
		"processes":{%s},"data":{"state":{"name":"healthy","healthy":true,"min_replicas_remaining":%d},
		"team_trackers":[{"primary":true,"state":{"name":"healthy","healthy":true,"min_replicas_remaining":%d}}]}}}`,
		mode, extra, strings.Join(procs, ","), minReplicas, minReplicas)
	var st Status
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

// TestCheckRemovalRedundancyModes: the replacement refusal counts fault domains with the mode's
// arithmetic: three_data_hall_fallback keeps 2 replicas and tolerates one fault domain,
// three_datacenter keeps 6, and satellites do not change the storage side.
func TestCheckRemovalRedundancyModes(t *testing.T) {
	six := map[string]string{"s1": "z1", "s2": "z2", "s3": "z3", "s4": "z4", "s5": "z5", "s6": "z6", "s7": "z7"}
	for _, tc := range []struct {
		name, mode string
		min        int
		groups     []string
		extra      string
		refused    string
	}{
		{name: "three_data_hall_fallback one domain", mode: "three_data_hall_fallback", min: 2, groups: []string{"s1"}},
		{name: "three_data_hall_fallback two domains", mode: "three_data_hall_fallback", min: 2, groups: []string{"s1", "s2"},
			refused: "redundancy mode three_data_hall_fallback, which tolerates losing 1 at once"},
		{name: "three_datacenter three domains", mode: "three_datacenter", min: 6, groups: []string{"s1", "s2", "s3"}},
		{name: "three_datacenter four domains", mode: "three_datacenter", min: 6, groups: []string{"s1", "s2", "s3", "s4"},
			refused: "redundancy mode three_datacenter, which tolerates losing 3 at once"},
		{name: "three_datacenter degraded", mode: "three_datacenter", min: 5, groups: []string{"s1"}, refused: "min_replicas_remaining 5, below the configured 6"},
		{name: "double with satellites, two domains", mode: "double", min: 2, groups: []string{"s1", "s2"},
			extra: `,"usable_regions":1,"regions":[{"satellite_redundancy_mode":"one_satellite_double"}]`, refused: "redundancy mode double, which tolerates losing 1 at once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := statusOf(t, tc.mode, tc.min, six, tc.extra)
			c := &ops.Cluster{Name: "db", Namespace: "ns"}
			err := checkRemoval(c, CRState{}, st, tc.groups, redundancyOf(st), false)
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused) || ops.ExitCode(err) != ops.ExitPrecondition):
				t.Fatalf("err %v, want a refusal naming %q", err, tc.refused)
			}
		})
	}
}
