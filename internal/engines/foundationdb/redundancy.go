package foundationdb

import (
	"fmt"
	"sort"
	"strings"
)

// redundancy is the replication arithmetic of a database configuration, as FoundationDB defines
// it: every refusal that counts replicas, fault domains or tolerated failures reads it from
// here, never from a switch of its own.
type redundancy struct {
	// Mode is the redundancy mode ("custom" for replicas set without a mode).
	Mode string
	// StorageReplicas is the storage team size: the replicas of every piece of data, the
	// distinct fault domains (zoneids; data halls in three_data_hall*, zoneids over
	// datacenters in three_datacenter*) a team spans, and the min_replicas_remaining of a
	// healthy team tracker.
	StorageReplicas int
	// LogReplicas is the log replication factor.
	LogReplicas int
	// FaultTolerance is how many fault domains may be lost at once without losing data.
	FaultTolerance int
}

// modeReplicas: storage team size and log replication factor of each redundancy mode
// (the configuration keys storage_replicas and log_replicas that configure writes for it).
var modeReplicas = map[string][2]int{
	"single":                    {1, 1},
	"double":                    {2, 2},
	"fast_recovery_double":      {2, 2},
	"triple":                    {3, 3},
	"fast_recovery_triple":      {3, 3},
	"three_datacenter":          {6, 4},
	"multi_dc":                  {6, 4},
	"three_datacenter_fallback": {4, 4},
	"three_data_hall":           {3, 4},
	"three_data_hall_fallback":  {2, 4},
}

// satelliteModes: log replicas and write anti-quorum of a satellite redundancy mode, and of its
// fallback when it has one.
var satelliteModes = map[string][4]int{
	"one_satellite_single": {1, 0, 0, 0},
	"one_satellite_double": {2, 0, 0, 0},
	"one_satellite_triple": {3, 0, 0, 0},
	"two_satellite_safe":   {4, 0, 2, 0},
	"two_satellite_fast":   {4, 2, 2, 0},
}

// satellite is one region's satellite log configuration.
type satellite struct {
	Replicas, AntiQuorum                 int
	FallbackReplicas, FallbackAntiQuorum int
}

// satelliteOf reads a region's satellite_redundancy_mode, or its explicit satellite_* keys.
func satelliteOf(mode string, replicas, antiQuorum, fbReplicas, fbAntiQuorum int) satellite {
	if m, ok := satelliteModes[mode]; ok {
		return satellite{m[0], m[1], m[2], m[3]}
	}
	return satellite{replicas, antiQuorum, fbReplicas, fbAntiQuorum}
}

// redundancyFor computes the arithmetic of mode (the operator's default double when empty),
// with storage and log replicas given explicitly for a custom configuration, satellite logs per
// region and the usable regions. known is false for a mode FoundationDB does not define.
//
// The fault tolerance is FoundationDB's DatabaseConfiguration::maxZoneFailuresTolerated: without
// satellite logs min(log replicas - 1, storage replicas - 1); with satellites, whose logs are
// synchronous, min(log replicas + worst satellite replicas - 1, storage replicas - 1), and with
// two usable regions 1 + min(max(log replicas - 1, worst satellite replicas - 1), storage
// replicas - 1). The operator's own helpers (MinimumFaultDomains, DesiredFaultTolerance) know
// only single, double, triple and three_data_hall and answer 1 and 0 for every other mode,
// which would let a refusal pass that FoundationDB's arithmetic refuses.
func redundancyFor(mode string, storageReplicas, logReplicas int, satellites []satellite, usableRegions int) (redundancy, bool) {
	r := redundancy{Mode: mode}
	known := true
	switch m, ok := modeReplicas[mode]; {
	case ok:
		r.StorageReplicas, r.LogReplicas = m[0], m[1]
	case mode == "" && storageReplicas > 0:
		r.Mode, r.StorageReplicas, r.LogReplicas = "custom", storageReplicas, max(logReplicas, 1)
	case mode == "":
		r.Mode, r.StorageReplicas, r.LogReplicas = "double", 2, 2
	default:
		known = false
		// An unknown mode: the strictest reading of what status says, never fewer than two.
		r.StorageReplicas, r.LogReplicas = max(storageReplicas, 2), max(logReplicas, 2)
	}
	worst := 0
	for i, s := range satellites {
		w := s.Replicas - s.AntiQuorum
		if s.FallbackReplicas > 0 {
			w = min(w, s.FallbackReplicas-s.FallbackAntiQuorum)
		}
		if i == 0 || w < worst {
			worst = w
		}
	}
	switch {
	case worst <= 0:
		r.FaultTolerance = min(r.LogReplicas-1, r.StorageReplicas-1)
	case usableRegions > 1:
		r.FaultTolerance = 1 + min(max(r.LogReplicas-1, worst-1), r.StorageReplicas-1)
	default:
		r.FaultTolerance = min(r.LogReplicas+worst-1, r.StorageReplicas-1)
	}
	r.FaultTolerance = max(r.FaultTolerance, 0)
	return r, known
}

// redundancyOf is the arithmetic of the configuration status json reports.
func redundancyOf(st *Status) redundancy {
	cfg := st.Cluster.Configuration
	if cfg == nil {
		r, _ := redundancyFor("", 0, 0, nil, 1)
		return r
	}
	var sats []satellite
	for _, rg := range cfg.Regions {
		sats = append(sats, satelliteOf(rg.SatelliteRedundancyMode, rg.SatelliteLogReplicas, rg.SatelliteAntiQuorum,
			rg.SatelliteLogReplicasFallback, rg.SatelliteAntiQuorumFallback))
	}
	r, _ := redundancyFor(cfg.RedundancyMode, cfg.StorageReplicas, cfg.LogReplicas, sats, cfg.UsableRegions)
	return r
}

// storageSpreadShort says why the storage processes that keep data (reporting, not excluded)
// span fewer zoneids than a team of the redundancy mode, "" when they span enough. FoundationDB
// then builds no team (its data distributor needs the team size in distinct zoneids among
// healthy servers): an excluded server's data cannot move, and lost replicas are not restored,
// until a storage process runs in another zoneid. The operator places replacements where the
// scheduler puts their pods, which may be a zoneid already in use.
func storageSpreadShort(st *Status, rd redundancy) string {
	zones := map[string][]string{}
	for _, pr := range st.Cluster.Processes {
		if pr.ClassType != "storage" || pr.Excluded {
			continue
		}
		zones[pr.Zone()] = append(zones[pr.Zone()], pr.InstanceID())
	}
	if len(zones) >= rd.StorageReplicas {
		return ""
	}
	var parts []string
	for _, z := range sortedKeys(zones) {
		ids := zones[z]
		sort.Strings(ids)
		parts = append(parts, fmt.Sprintf("%s (%s)", dash(z), strings.Join(ids, ", ")))
	}
	return fmt.Sprintf("a storage process in another zoneid: the storage that keeps data spans %d zoneid(s), %s, and redundancy mode %s needs %d distinct ones for a team, so data cannot move or regain its replicas (the operator's placement left the fault domains short)",
		len(zones), strings.Join(parts, "; "), rd.Mode, rd.StorageReplicas)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
