package fdbop

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"strings"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

// The operator's maintenance-mode checker (FoundationDB/fdb-kubernetes-operator
// controllers/maintenance_mode_checker.go, internal/maintenance/maintenance.go): with
// spec.automationOptions.maintenanceModeOptions.UseMaintenanceModeChecker or
// resetMaintenanceMode set, every reconcile reads the list of process groups under maintenance
// (keys <lock prefix>/maintenance/<process group ID>, value the maintenance start as a
// little-endian int64 of unix seconds; fdbclient/admin_client.go), drops the entries of
// storage processes restarted since their start and stale ones, and — when a maintenance zone
// is set and no listed storage process of that zone still waits for its restart — switches
// maintenance off. A zone whose processes nobody listed is therefore cleared at the first
// reconcile that finds the database available.

// Defaults of the operator's flags (setup/setup.go).
const (
	maintenanceListStaleDuration = 4 * time.Hour
	maintenanceListWaitDuration  = 5 * time.Minute
)

// defaultLockPrefix is GetLockPrefix without spec.lockOptions.lockKeyPrefix
// (api/v1beta2/foundationdbcluster_types.go).
const defaultLockPrefix = "\xff\x02/org.foundationdb.kubernetes-operator"

// maintenanceOptions are the spec fields the checker reads.
type maintenanceOptions struct {
	AutomationOptions struct {
		MaintenanceModeOptions struct {
			UseMaintenanceModeChecker *bool `json:"UseMaintenanceModeChecker,omitempty"`
			ResetMaintenanceMode      *bool `json:"resetMaintenanceMode,omitempty"`
		} `json:"maintenanceModeOptions,omitempty"`
	} `json:"automationOptions,omitempty"`
	LockOptions struct {
		LockKeyPrefix string `json:"lockKeyPrefix,omitempty"`
	} `json:"lockOptions,omitempty"`
	ProcessGroupIDPrefix string `json:"processGroupIDPrefix,omitempty"`
}

// resetMaintenanceMode is ResetMaintenanceMode(): either option turns the checker on.
func (m *maintenanceOptions) resetMaintenanceMode() bool {
	mo := m.AutomationOptions.MaintenanceModeOptions
	return (mo.UseMaintenanceModeChecker != nil && *mo.UseMaintenanceModeChecker) ||
		(mo.ResetMaintenanceMode != nil && *mo.ResetMaintenanceMode)
}

func (m *maintenanceOptions) maintenancePrefix() string {
	p := m.LockOptions.LockKeyPrefix
	if p == "" {
		p = defaultLockPrefix
	}
	return p + "/maintenance"
}

// checkerStatus is the part of status json the checker reads.
type checkerStatus struct {
	Client struct {
		DatabaseStatus struct {
			Available bool `json:"available"`
		} `json:"database_status"`
	} `json:"client"`
	Cluster struct {
		MaintenanceZone string `json:"maintenance_zone"`
		Processes       map[string]struct {
			ClassType     string            `json:"class_type"`
			Locality      map[string]string `json:"locality"`
			UptimeSeconds float64           `json:"uptime_seconds"`
		} `json:"processes"`
		RecoveryState struct {
			ActiveGenerations int `json:"active_generations"`
		} `json:"recovery_state"`
	} `json:"cluster"`
}

// checkMaintenance is one run of the checker for a cluster. storageGroups are the storage
// process groups of the CR's status (for the removed-group stale rule).
func (o *Operator) checkMaintenance(ctx context.Context, model *fdbsim.Cluster, opts *maintenanceOptions, storageGroups map[string]bool, ls *lockSpec) {
	if !opts.resetMaintenanceMode() {
		return
	}
	var st checkerStatus
	if err := json.Unmarshal(model.StatusJSON(), &st); err != nil || !st.Client.DatabaseStatus.Available {
		// "cluster is not available": requeue.
		return
	}
	prefix := opts.maintenancePrefix()
	listed := map[string]int64{}
	for k, v := range model.KV(prefix) {
		id := k[strings.LastIndex(k, "/")+1:]
		var ts int64
		if err := binary.Read(bytes.NewReader(v), binary.LittleEndian, &ts); err != nil {
			ts = 0 // a bad entry is removed (admin_client.go)
		}
		listed[id] = ts
	}
	now := o.host.Clock().Now()
	var finished, stale, toUpdate []string
	for _, p := range st.Cluster.Processes {
		// Only storage processes are affected by the maintenance mode.
		if p.ClassType != fdbsim.ClassStorage {
			continue
		}
		id, ok := p.Locality["instance_id"]
		if !ok {
			continue
		}
		start, listedNow := listed[id]
		if !listedNow {
			continue
		}
		zone, ok := p.Locality["zoneid"]
		if !ok {
			continue
		}
		delete(listed, id)
		started := now.Add(-time.Duration(p.UptimeSeconds) * time.Second)
		maintStart := time.Unix(start, 0)
		if started.After(maintStart) {
			finished = append(finished, id)
			continue
		}
		if zone != st.Cluster.MaintenanceZone {
			since := now.Sub(maintStart)
			if since < maintenanceListWaitDuration {
				toUpdate = append(toUpdate, id)
			}
			if since > maintenanceListStaleDuration {
				stale = append(stale, id)
			}
			continue
		}
		toUpdate = append(toUpdate, id)
	}
	for id, start := range listed {
		if now.Sub(time.Unix(start, 0)) > maintenanceListStaleDuration {
			stale = append(stale, id)
			continue
		}
		if strings.HasPrefix(id, opts.ProcessGroupIDPrefix) && !storageGroups[id] {
			stale = append(stale, id)
			continue
		}
		toUpdate = append(toUpdate, id)
	}
	if done := append(finished, stale...); len(done) > 0 {
		keys := make([]string, len(done))
		for i, id := range done {
			keys[i] = prefix + "/" + id
		}
		model.ClearKeys("operator", keys)
	}
	if st.Cluster.MaintenanceZone == "" || len(toUpdate) > 0 {
		return
	}
	// CanSafelyRemoveMaintenanceMode: DefaultSafetyChecks (available, at most 10 active
	// generations); the model reports no QoS lag.
	if st.Cluster.RecoveryState.ActiveGenerations > 10 {
		return
	}
	if o.takeLock(model, ls, "maintenance mode check") != nil {
		return // "maintenance mode check" waits for the lock
	}
	var out, errb bytes.Buffer
	_ = model.RunAs(ctx, "operator", []string{"--exec", "maintenance off", "--timeout", "10"}, &out, &errb)
}
