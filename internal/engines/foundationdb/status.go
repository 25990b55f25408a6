package foundationdb

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Status is the part of FoundationDB's machine-readable status (`status json`, documented in
// FoundationDB's mr-status-json-schemas.rst.inc) the engine reads. While the database is
// unavailable the "cluster" object may be missing most of these fields: every reader checks.
type Status struct {
	Client struct {
		Coordinators struct {
			Coordinators []struct {
				Address   string `json:"address"`
				Reachable bool   `json:"reachable"`
			} `json:"coordinators"`
			QuorumReachable bool `json:"quorum_reachable"`
		} `json:"coordinators"`
		DatabaseStatus struct {
			Available bool `json:"available"`
			Healthy   bool `json:"healthy"`
		} `json:"database_status"`
		Messages []Message `json:"messages"`
	} `json:"client"`
	Cluster struct {
		Generation        int  `json:"generation"`
		DatabaseAvailable bool `json:"database_available"`
		RecoveryState     *struct {
			Name              string `json:"name"`
			ActiveGenerations int    `json:"active_generations"`
			Description       string `json:"description"`
			// SecondsSinceLastRecovered: the operator paces exclusions, inclusions and
			// coordinator changes by it (docs/procedures.md).
			SecondsSinceLastRecovered *float64 `json:"seconds_since_last_recovered"`
		} `json:"recovery_state"`
		Processes     map[string]Process `json:"processes"`
		Configuration *struct {
			RedundancyMode  string `json:"redundancy_mode"`
			LogReplicas     int    `json:"log_replicas"`
			StorageReplicas int    `json:"storage_replicas"`
			UsableRegions   int    `json:"usable_regions"`
			// Regions are the region configuration (DatabaseConfiguration::getRegionJSON).
			Regions []struct {
				SatelliteRedundancyMode      string `json:"satellite_redundancy_mode"`
				SatelliteLogReplicas         int    `json:"satellite_log_replicas"`
				SatelliteAntiQuorum          int    `json:"satellite_anti_quorum"`
				SatelliteLogReplicasFallback int    `json:"satellite_log_replicas_fallback"`
				SatelliteAntiQuorumFallback  int    `json:"satellite_anti_quorum_fallback"`
			} `json:"regions"`
			ExcludedServers []struct {
				Address  string `json:"address"`
				Locality string `json:"locality"`
			} `json:"excluded_servers"`
		} `json:"configuration"`
		Data *struct {
			State struct {
				Name                 string `json:"name"`
				Healthy              bool   `json:"healthy"`
				MinReplicasRemaining *int   `json:"min_replicas_remaining"`
			} `json:"state"`
			MovingData struct {
				InFlightBytes int64 `json:"in_flight_bytes"`
				InQueueBytes  int64 `json:"in_queue_bytes"`
			} `json:"moving_data"`
			TeamTrackers []struct {
				Primary bool `json:"primary"`
				State   struct {
					Name                 string `json:"name"`
					Healthy              bool   `json:"healthy"`
					MinReplicasRemaining int    `json:"min_replicas_remaining"`
				} `json:"state"`
			} `json:"team_trackers"`
		} `json:"data"`
		Logs []struct {
			Current                    bool `json:"current"`
			LogReplicationFactor       int  `json:"log_replication_factor"`
			LogFaultTolerance          int  `json:"log_fault_tolerance"`
			RemoteLogReplicationFactor int  `json:"remote_log_replication_factor"`
			RemoteLogFaultTolerance    int  `json:"remote_log_fault_tolerance"`
			// A multi-region cluster's satellite logs (status json's logs[], Status.actor.cpp).
			SatelliteLogReplicationFactor int `json:"satellite_log_replication_factor"`
			SatelliteLogFaultTolerance    int `json:"satellite_log_fault_tolerance"`
		} `json:"logs"`
		FaultTolerance *struct {
			Data         int `json:"max_zone_failures_without_losing_data"`
			Availability int `json:"max_zone_failures_without_losing_availability"`
		} `json:"fault_tolerance"`
		// Qos is what the operator's CheckQosStatus reads (restart.go canEndMaintenance).
		Qos *struct {
			WorstQueueBytesLogServer     int64 `json:"worst_queue_bytes_log_server"`
			WorstQueueBytesStorageServer int64 `json:"worst_queue_bytes_storage_server"`
			WorstDataLagStorageServer    struct {
				Seconds float64 `json:"seconds"`
			} `json:"worst_data_lag_storage_server"`
			WorstDurabilityLagStorageServer struct {
				Seconds float64 `json:"seconds"`
			} `json:"worst_durability_lag_storage_server"`
		} `json:"qos"`
		MaintenanceZone             string   `json:"maintenance_zone"`
		MaintenanceSecondsRemaining *float64 `json:"maintenance_seconds_remaining"`
		BounceImpact                *struct {
			CanCleanBounce *bool  `json:"can_clean_bounce"`
			Reason         string `json:"reason"`
		} `json:"bounce_impact"`
		ConnectionString string    `json:"connection_string"`
		Messages         []Message `json:"messages"`
	} `json:"cluster"`
}

// Message is a status message.
type Message struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// Process is one fdbserver process in status json.
type Process struct {
	Address     string            `json:"address"`
	ClassType   string            `json:"class_type"`
	Locality    map[string]string `json:"locality"`
	FaultDomain string            `json:"fault_domain"`
	Roles       []struct {
		Role string `json:"role"`
		// StoredBytes is what a storage role holds (mr-status-json-schemas.rst.inc).
		StoredBytes int64 `json:"stored_bytes"`
	} `json:"roles"`
	UptimeSeconds    float64 `json:"uptime_seconds"`
	Excluded         bool    `json:"excluded"`
	UnderMaintenance bool    `json:"under_maintenance"`
	Degraded         bool    `json:"degraded"`
	// Version is the fdbserver version the process runs (e.g. "7.1.57").
	Version string `json:"version"`
}

// InstanceID is the process's locality_instance_id: the operator's process group ID.
func (p Process) InstanceID() string { return p.Locality["instance_id"] }

// Zone is the process's zoneid.
func (p Process) Zone() string {
	if z := p.Locality["zoneid"]; z != "" {
		return z
	}
	return p.FaultDomain
}

// RoleNames are the process's roles, sorted.
func (p Process) RoleNames() []string {
	out := make([]string, 0, len(p.Roles))
	for _, r := range p.Roles {
		if !slices.Contains(out, r.Role) {
			out = append(out, r.Role)
		}
	}
	sort.Strings(out)
	return out
}

// HasRole reports whether the process holds role.
func (p Process) HasRole(role string) bool { return slices.Contains(p.RoleNames(), role) }

// ByInstance returns the processes of one process group (several with more servers per pod).
func (s *Status) ByInstance(id string) []Process {
	var out []Process
	for _, p := range s.Cluster.Processes {
		if p.InstanceID() == id {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return out
}

// Available is client.database_status.available.
func (s *Status) Available() bool { return s.Client.DatabaseStatus.Available }

// RecoveryName is the recovery state's name ("" when status has none).
func (s *Status) RecoveryName() string {
	if s.Cluster.RecoveryState == nil {
		return ""
	}
	return s.Cluster.RecoveryState.Name
}

// lastRecovery says how long ago the last recovery was, for a waiting reason ("" when status
// json does not say).
func (s *Status) lastRecovery() string {
	if s == nil || s.Cluster.RecoveryState == nil || s.Cluster.RecoveryState.SecondsSinceLastRecovered == nil {
		return ""
	}
	return fmt.Sprintf("; the last recovery was %.0fs ago", *s.Cluster.RecoveryState.SecondsSinceLastRecovered)
}

// ActiveGenerations is recovery_state.active_generations (0 when absent).
func (s *Status) ActiveGenerations() int {
	if s.Cluster.RecoveryState == nil {
		return 0
	}
	return s.Cluster.RecoveryState.ActiveGenerations
}

// IsCoordinator reports whether the process at address is a coordinator: it holds the
// `coordinator` role in cluster.processes (FDB resolves the cluster file's coordinators, DNS
// names included, to process addresses for that role: fdbserver Status.actor.cpp
// addCoordinatorRole), or its address is one the cluster file names (client.coordinators, which
// holds the cluster file's entries as written: hostnames when the operator writes DNS names,
// spec.routing.useDNSInClusterFile, so an IP never matches them; the role is what counts).
func (s *Status) IsCoordinator(address string) bool {
	for _, p := range s.Cluster.Processes {
		if p.Address == address && p.HasRole("coordinator") {
			return true
		}
	}
	for _, c := range s.Client.Coordinators.Coordinators {
		if c.Address == address {
			return true
		}
	}
	return false
}

// Exclusions lists configuration.excluded_servers as written (address or locality).
func (s *Status) Exclusions() []string {
	if s.Cluster.Configuration == nil {
		return nil
	}
	var out []string
	for _, e := range s.Cluster.Configuration.ExcludedServers {
		if e.Address != "" {
			out = append(out, e.Address)
		} else if e.Locality != "" {
			out = append(out, e.Locality)
		}
	}
	return out
}

// Problems are the messages that explain an unavailable or incomplete status.
func (s *Status) Problems() string {
	var out []string
	for _, m := range append(slices.Clone(s.Client.Messages), s.Cluster.Messages...) {
		if m.Description != "" {
			out = append(out, m.Description)
		} else if m.Name != "" {
			out = append(out, m.Name)
		}
	}
	return strings.Join(out, "; ")
}
