package fdbsim

import (
	"encoding/json"
	"net"
	"slices"
	"sort"
	"strings"
	"time"
)

// Version is the fdbserver version the model reports.
const Version = "7.3.63"

// StatusJSON is `status json` at the model's now, as
// documentation/sphinx/source/mr-status-json-schemas.rst.inc describes it. Without a
// coordinators' quorum or cluster controller the "cluster" object holds only what a client can
// know (StatusClient.actor.cpp: the status is incomplete), and client.database_status says
// unavailable.
func (c *Cluster) StatusJSON() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.advance(now)
	return c.statusJSON(now)
}

type obj = map[string]any

func (c *Cluster) statusJSON(now time.Time) []byte {
	available := c.available(now)
	coords := []any{}
	for _, a := range c.coordinators {
		p := c.coordinatorProcess(a) // a: the cluster file's entry as written (dns.go)
		coords = append(coords, obj{"address": a, "reachable": p != nil && p.up, "protocol": "0fdb00b073000000"})
	}
	clientMsgs := []any{}
	client := obj{
		"coordinators":    obj{"coordinators": coords, "quorum_reachable": c.quorum()},
		"database_status": obj{"available": available, "healthy": false},
		"timestamp":       now.Unix(),
		"cluster_file":    obj{"path": "/var/dynamic-conf/fdb.cluster", "up_to_date": true},
	}
	out := obj{"client": client}
	if !c.quorum() {
		clientMsgs = append(clientMsgs, obj{"name": "quorum_not_reachable",
			"description": "Unable to reach a quorum of coordinators."})
		client["messages"] = clientMsgs
		out["cluster"] = obj{"layers": obj{"_valid": false}}
		return mustJSON(out)
	}
	if !c.ccReachable() {
		clientMsgs = append(clientMsgs, obj{"name": "no_cluster_controller",
			"description": "Unable to locate a cluster controller within 2 seconds.  Check that there are server processes running."})
		client["messages"] = clientMsgs
		out["cluster"] = obj{"layers": obj{"_valid": false}}
		return mustJSON(out)
	}
	client["messages"] = clientMsgs

	r := replicas(c.cfg.RedundancyMode)
	recIdx := c.recoveryIndex(now)
	recName := recoveryStates[recIdx]
	if c.rec.stalled {
		recName = "recruiting_transaction_servers"
	}
	activeGens := 1
	if c.rec.oldGeneration && recName != "fully_recovered" {
		activeGens = 2
	}
	dataName, dataHealthy, minRepl, _ := c.storageState()

	procs := obj{}
	for _, p := range c.procs {
		if !p.up {
			// A process that is down is not in the cluster controller's worker list.
			continue
		}
		roles := []any{}
		for _, role := range c.roles(p) {
			ro := obj{"role": role, "id": p.processID[:16]}
			if role == "storage" {
				// mr-status-json-schemas.rst.inc: storage roles report stored_bytes.
				ro["stored_bytes"] = c.storedBytes(p, now)
			}
			roles = append(roles, ro)
		}
		loc := obj{}
		for k, v := range c.locality(p) {
			loc[k] = v
		}
		_, excluded := c.excludedBy(p)
		po := obj{
			"address":        p.spec.Address,
			"class_source":   "command_line",
			"class_type":     p.spec.Class,
			"locality":       loc,
			"machine_id":     p.spec.Machine,
			"fault_domain":   p.spec.Zone,
			"roles":          roles,
			"uptime_seconds": now.Sub(p.started).Seconds(),
			"excluded":       excluded,
			"degraded":       false,
			"version":        c.cfg.Version,
			"messages":       []any{},
		}
		// Status.actor.cpp processStatusFetcher sets under_maintenance only when true.
		if c.maintZone != "" && p.spec.Zone == c.maintZone {
			po["under_maintenance"] = true
		}
		procs[p.processID] = po
	}

	// Fault tolerance as faultToleranceStatusFetcher (fdbserver/Status.actor.cpp) computes it.
	underMaint := c.maintZone != ""
	maxZoneFailures := r - 1
	if underMaint {
		maxZoneFailures--
	}
	maxCoordFailures := (len(c.coordinators) - 1) / 2
	zoneCount := map[string]int{}
	for _, a := range c.coordinators {
		z := ""
		if p := c.coordinatorProcess(a); p != nil && p.up {
			z = p.spec.Zone
		}
		zoneCount[z]++
	}
	counts := []int{}
	for _, n := range zoneCount {
		counts = append(counts, n)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(counts)))
	lost, coordZoneFailures := 0, 0
	for _, n := range counts {
		lost += n
		if lost > maxCoordFailures {
			break
		}
		coordZoneFailures++
	}
	ftData := min(maxZoneFailures, coordZoneFailures, minRepl-1)
	ftData = max(ftData, -1)
	logZones := map[string]bool{}
	for _, p := range c.procs {
		if p.up && p.spec.Class == ClassLog {
			if _, ex := c.excludedBy(p); !ex {
				logZones[p.spec.Zone] = true
			}
		}
	}
	extraTlogZones := max(len(logZones)-r, 0)
	ftAvail := max(min(maxZoneFailures, extraTlogZones, ftData), -1)

	excludedServers := []any{}
	for _, e := range c.exclusions {
		if strings.HasPrefix(e.key, "locality_") {
			excludedServers = append(excludedServers, obj{"locality": e.key})
		} else {
			excludedServers = append(excludedServers, obj{"address": e.key})
		}
	}
	var movingBytes int64
	for _, p := range c.procs {
		if _, ex := c.excludedBy(p); ex && p.spec.Class == ClassStorage && !p.removedData {
			movingBytes += max(c.storedBytes(p, now), 1)
		}
		// Relocations queued while a storage server was failed (bringUp); the team tracker
		// reports them as in flight (Status.actor.cpp dataStatusFetcher: "MovingData" InFlight).
		if p.spec.Class == ClassStorage && now.Before(p.movingUntil) {
			movingBytes += max(c.storedBytes(p, now), 1)
		}
	}
	movingBytes += c.load.InFlightBytes
	dataState := obj{"name": dataName, "healthy": dataHealthy, "min_replicas_remaining": minRepl}
	description := "Recovery complete."
	if recName != "fully_recovered" {
		description = "Recovery in progress."
	}
	// The current generation's logs (Status.actor.cpp tlogFetcher): the fault tolerance is the
	// replication factor less one, less each log that does not answer.
	logIfaces := []any{}
	downLogs := 0
	for _, id := range sortedKeys(c.txnRoles) {
		if !slices.Contains(c.txnRoles[id], "log") {
			continue
		}
		p := c.byID(id)
		logIfaces = append(logIfaces, obj{"id": p.processID[:16], "healthy": p.up, "address": p.spec.Address})
		if !p.up {
			downLogs++
		}
	}
	logs := []any{obj{"epoch": c.generation, "current": true, "log_replication_factor": r, "log_write_anti_quorum": 0,
		"log_fault_tolerance": max(r-1-downLogs, -1), "log_interfaces": logIfaces}}
	cluster := obj{
		"logs":               logs,
		"generation":         c.generation,
		"database_available": available,
		"connection_string":  c.connectionString(),
		"protocol_version":   "fdb00b073000000",
		"full_replication":   dataHealthy,
		"recovery_state": obj{
			"name":                         recName,
			"description":                  description,
			"active_generations":           activeGens,
			"seconds_since_last_recovered": now.Sub(c.rec.start).Seconds(),
			"required_logs":                min(c.cfg.Logs, len(logZones)),
		},
		"processes": procs,
		"configuration": obj{
			"redundancy_mode":    c.cfg.RedundancyMode,
			"log_replicas":       r,
			"coordinators_count": len(c.coordinators),
			"logs":               c.cfg.Logs,
			"commit_proxies":     c.cfg.CommitProxies,
			"grv_proxies":        c.cfg.GrvProxies,
			"resolvers":          c.cfg.Resolvers,
			"storage_engine":     "ssd-2",
			"excluded_servers":   excludedServers,
		},
		"data": obj{
			"state":         dataState,
			"team_trackers": []any{obj{"primary": true, "in_flight_bytes": movingBytes, "state": dataState}},
			"moving_data":   obj{"in_flight_bytes": movingBytes, "in_queue_bytes": 0, "total_written_bytes": 0},
		},
		"fault_tolerance": obj{
			"max_zone_failures_without_losing_data":         ftData,
			"max_zone_failures_without_losing_availability": ftAvail,
		},
		// workloadStatusFetcher (Status.actor.cpp): the worst lags and queues of the storage
		// servers and logs, as the ratekeeper sees them.
		"qos": obj{
			"worst_queue_bytes_log_server":        c.load.LogQueueBytes,
			"worst_queue_bytes_storage_server":    c.load.StorageQueueBytes,
			"worst_data_lag_storage_server":       obj{"seconds": c.load.DataLag.Seconds(), "versions": int64(c.load.DataLag.Seconds() * 1e6)},
			"worst_durability_lag_storage_server": obj{"seconds": c.load.DurabilityLag.Seconds(), "versions": int64(c.load.DurabilityLag.Seconds() * 1e6)},
			"performance_limited_by":              obj{"name": "workload", "description": "The database is not being saturated by the workload."},
		},
		"layers":   obj{"_valid": true},
		"messages": []any{},
	}
	// getBounceImpactInfo (Status.actor.cpp): a clean bounce only when fully recovered.
	if recName == "fully_recovered" {
		cluster["bounce_impact"] = obj{"can_clean_bounce": true}
	} else {
		cluster["bounce_impact"] = obj{"can_clean_bounce": false, "reason": "cluster hasn't fully recovered yet"}
	}
	if underMaint {
		cluster["maintenance_zone"] = c.maintZone
		cluster["maintenance_seconds_remaining"] = c.maintUntil.Sub(now).Seconds()
	}
	client["database_status"] = obj{"available": available, "healthy": available && dataHealthy && recName == "fully_recovered"}
	out["cluster"] = cluster
	return mustJSON(out)
}

func mustJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		// Only maps, slices, strings and numbers are marshalled.
		panic(err)
	}
	return b
}

// ipOf is the IP of an address without port or ":tls".
func ipOf(a string) string {
	host, _, err := net.SplitHostPort(strings.TrimSuffix(a, ":tls"))
	if err != nil {
		return a
	}
	return host
}
