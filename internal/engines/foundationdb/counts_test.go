package foundationdb

import (
	"maps"
	"testing"
)

// sampleSpec is the spec fields of the operator's config/samples/cluster.yaml that decide its
// counts: no redundancy mode (double), cluster_controller 1, stateless -1, storage and log unset.
func sampleSpec() map[string]any {
	return map[string]any{
		"faultDomain":   map[string]any{"key": "foundationdb.org/none"},
		"processCounts": map[string]any{"cluster_controller": int64(1), "stateless": int64(-1)},
	}
}

// TestProcessCounts: the operator's GetProcessCountsWithDefaults (api/v1beta2
// foundationdbcluster_types.go) and ProcessCounts.Map, worked out by hand from its source.
func TestProcessCounts(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec map[string]any
		want map[string]int
	}{
		// storage 2*1+1; log 3 logs + tolerance 1; stateless -1: none.
		{name: "operator sample", spec: sampleSpec(), want: map[string]int{"storage": 3, "log": 4, "cluster_controller": 1}},
		// stateless: master, cluster controller, resolver, ratekeeper, data distributor, 3 proxies
		// = 8, + tolerance 1.
		{name: "double, nothing set", spec: map[string]any{}, want: map[string]int{"storage": 3, "log": 4, "stateless": 9}},
		{name: "zero is the default", spec: map[string]any{"processCounts": map[string]any{"storage": int64(0), "log": int64(0), "stateless": int64(0)}},
			want: map[string]int{"storage": 3, "log": 4, "stateless": 9}},
		{name: "triple", spec: map[string]any{"databaseConfiguration": map[string]any{"redundancy_mode": "triple"}},
			want: map[string]int{"storage": 5, "log": 5, "stateless": 10}},
		{name: "single", spec: map[string]any{"databaseConfiguration": map[string]any{"redundancy_mode": "single"}},
			want: map[string]int{"storage": 1, "log": 3, "stateless": 8}},
		{name: "three_data_hall: 4 logs", spec: map[string]any{"databaseConfiguration": map[string]any{"redundancy_mode": "three_data_hall"}},
			want: map[string]int{"storage": 5, "log": 6, "stateless": 10}},
		// Separated proxies: grv 2 + commit 4 in place of 3 proxies; 11 + 2.
		{name: "separated proxies", spec: map[string]any{"databaseConfiguration": map[string]any{"redundancy_mode": "triple", "grv_proxies": int64(2), "commit_proxies": int64(4)}},
			want: map[string]int{"storage": 5, "log": 5, "stateless": 13}},
		// A cluster_controller class takes that role off stateless: 7 + 1.
		{name: "cluster controller class", spec: map[string]any{"processCounts": map[string]any{"cluster_controller": int64(1)}},
			want: map[string]int{"storage": 3, "log": 4, "stateless": 8, "cluster_controller": 1}},
		{name: "explicit counts kept", spec: map[string]any{"processCounts": map[string]any{"storage": int64(7), "log": int64(-1), "transaction": int64(2)}},
			want: map[string]int{"storage": 7, "transaction": 2, "stateless": 9}},
		// Multi-KC: triple storage 5 over 3 Kubernetes clusters, the first two get the overflow.
		{name: "multi-KC", spec: map[string]any{"databaseConfiguration": map[string]any{"redundancy_mode": "triple"},
			"faultDomain": map[string]any{"key": "foundationdb.org/kubernetes-cluster", "value": "kc1", "zoneIndex": int64(0), "zoneCount": int64(3)}},
			want: map[string]int{"storage": 2, "log": 2, "stateless": 4}},
		// A satellite data center runs 1 + satellite_logs logs and nothing else by default.
		{name: "satellite", spec: map[string]any{"dataCenter": "dc3", "databaseConfiguration": map[string]any{"redundancy_mode": "triple", "usable_regions": int64(2),
			"regions": []any{map[string]any{"satellite_logs": int64(3), "datacenters": []any{
				map[string]any{"id": "dc1"}, map[string]any{"id": "dc3", "satellite": int64(1)}}}}}},
			want: map[string]int{"log": 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ProcessCounts(map[string]any{"spec": tc.spec}); !maps.Equal(got, tc.want) {
				t.Fatalf("counts %v, want %v", got, tc.want)
			}
		})
	}
}
