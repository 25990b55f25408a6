package fdbop

// Pacing: the operator waits after a recovery before it changes coordinators, excludes or
// includes, and spaces its removals (FoundationDB/fdb-kubernetes-operator):
//   - pkg/fdbstatus/status_checks.go checkIfClusterUpLongEnoughWithRecoveryState: an action
//     waits until status json's cluster.recovery_state.seconds_since_last_recovered is at least
//     its minimum; the check is skipped for versions before 7.1.22 (api/v1beta2
//     foundationdb_version.go SupportsRecoveryState), which do not report it;
//   - DefaultSafetyChecks: no action while the database is unavailable or has more than 10
//     active generations;
//   - controllers/exclude_processes.go: CanSafelyExcludeProcessesWithRecoveryState with the
//     --minimum-recovery-time-for-exclusion flag (setup/setup.go, default 120 s);
//     internal/removals GetRemainingMap applies the same check before it confirms an exclusion
//     for the removal;
//   - controllers/remove_process_groups.go includeProcessGroup: CanSafelyIncludeProcesses with
//     --minimum-recovery-time-for-inclusion (default 600 s), and only while recovery_state.name
//     is fully_recovered or all_logs_recruited (recoveryStateAllowsInclusion);
//   - controllers/change_coordinators.go: CanSafelyChangeCoordinators with
//     --minimum-uptime-for-coordinator-change-with-missing-process (default 2 min) when a
//     coordinator is missing from the processes, else
//     --minimum-uptime-for-coordinator-change-with-undesired-process (default 5 min) and the
//     default safety checks; exclude_processes.go changes the coordinators at once after it
//     excluded a coordinator;
//   - each of these actions "will cause a recovery": the operator resets the cached
//     seconds_since_last_recovered to 0 after one, so a later step of the same reconcile waits;
//   - remove_process_groups.go with internal/removals RemovalAllowed: unless
//     spec.automationOptions.removalMode is All, no removal until
//     spec.automationOptions.waitBetweenRemovalsSeconds (GetWaitBetweenRemovalsSeconds: unset or
//     negative is 60) have passed since the latest ResourcesTerminating condition of a group
//     still being removed; GetProcessGroupsToRemove removes one fault domain at a time (Zone,
//     the default of GetRemovalMode), one group (ProcessGroup), all (All) or none (None).

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Pacing is the operator's command-line pacing (setup/setup.go). The test bed sets small values
// to keep tests fast; New uses the operator's defaults when Options.Pacing is nil.
type Pacing struct {
	// MinimumRecoveryTimeForInclusion: --minimum-recovery-time-for-inclusion, default 600 s.
	MinimumRecoveryTimeForInclusion time.Duration
	// MinimumRecoveryTimeForExclusion: --minimum-recovery-time-for-exclusion, default 120 s.
	MinimumRecoveryTimeForExclusion time.Duration
	// MinimumUptimeForCoordinatorChangeWithMissingProcess: default 2 min.
	MinimumUptimeForCoordinatorChangeWithMissingProcess time.Duration
	// MinimumUptimeForCoordinatorChangeWithUndesiredProcess: default 5 min.
	MinimumUptimeForCoordinatorChangeWithUndesiredProcess time.Duration
}

// DefaultPacing is the operator's defaults (setup/setup.go).
func DefaultPacing() Pacing {
	return Pacing{
		MinimumRecoveryTimeForInclusion:                       600 * time.Second,
		MinimumRecoveryTimeForExclusion:                       120 * time.Second,
		MinimumUptimeForCoordinatorChangeWithMissingProcess:   2 * time.Minute,
		MinimumUptimeForCoordinatorChangeWithUndesiredProcess: 5 * time.Minute,
	}
}

// Removal modes (api/v1beta2 PodUpdateMode).
const (
	removalAll          = "All"
	removalZone         = "Zone"
	removalProcessGroup = "ProcessGroup"
	removalNone         = "None"
)

// automationOptions is the part of spec.automationOptions the removal reads.
type automationOptions struct {
	AutomationOptions struct {
		RemovalMode                string `json:"removalMode,omitempty"`
		WaitBetweenRemovalsSeconds *int   `json:"waitBetweenRemovalsSeconds,omitempty"`
	} `json:"automationOptions,omitempty"`
}

// removalMode is GetRemovalMode: Zone unless set.
func (a *automationOptions) removalMode() string {
	if m := a.AutomationOptions.RemovalMode; m != "" {
		return m
	}
	return removalZone
}

// waitBetweenRemovals is GetWaitBetweenRemovalsSeconds: 60 s when unset or negative.
func (a *automationOptions) waitBetweenRemovals() time.Duration {
	w := a.AutomationOptions.WaitBetweenRemovalsSeconds
	if w == nil || *w < 0 {
		return 60 * time.Second
	}
	return time.Duration(*w) * time.Second
}

// removalAllowed is internal/removals RemovalAllowed: the wait left before the next removal.
func removalAllowed(lastDeletion, now int64, wait time.Duration) (int64, bool) {
	ts := now - int64(wait/time.Second)
	if lastDeletion > ts {
		return lastDeletion - ts, false
	}
	return 0, true
}

// recoveryState is status json's cluster.recovery_state and the availability the default
// safety checks read.
type recoveryState struct {
	Client struct {
		DatabaseStatus struct {
			Available bool `json:"available"`
		} `json:"database_status"`
	} `json:"client"`
	Cluster struct {
		RecoveryState struct {
			Name                      string  `json:"name"`
			ActiveGenerations         int     `json:"active_generations"`
			SecondsSinceLastRecovered float64 `json:"seconds_since_last_recovered"`
		} `json:"recovery_state"`
	} `json:"cluster"`
}

// pace is one reconcile's view of the pacing: the status json read at its start, reset as the
// operator resets it after an action of its own.
type pace struct {
	p        Pacing
	supports bool // the version reports seconds_since_last_recovered (7.1.22 and later)
	st       recoveryState
}

func newPace(p Pacing, version string, statusJSON []byte) (*pace, error) {
	pc := &pace{p: p, supports: supportsRecoveryState(version)}
	if err := json.Unmarshal(statusJSON, &pc.st); err != nil {
		return nil, fmt.Errorf("status json: %w", err)
	}
	return pc, nil
}

// supportsRecoveryState: 7.1.22 or later (api/v1beta2 foundationdb_version.go).
func supportsRecoveryState(version string) bool {
	var v [3]int
	for i, s := range strings.SplitN(strings.SplitN(version, "-", 2)[0], ".", 3) {
		n, err := strconv.Atoi(s)
		if err != nil {
			return false
		}
		v[i] = n
	}
	for i, min := range [3]int{7, 1, 22} {
		if v[i] != min {
			return v[i] > min
		}
	}
	return true
}

// recovered is the operator's reset after its own action: "will cause a recovery".
func (pc *pace) recovered() { pc.st.Cluster.RecoveryState.SecondsSinceLastRecovered = 0 }

// defaultSafety is DefaultSafetyChecks.
func (pc *pace) defaultSafety(action string) error {
	if g := pc.st.Cluster.RecoveryState.ActiveGenerations; g > 10 {
		return fmt.Errorf("cluster has %d active generations, but only 10 active generations are allowed to safely %s", g, action)
	}
	if !pc.st.Client.DatabaseStatus.Available {
		return fmt.Errorf("cluster is unavailable, cannot %s", action)
	}
	return nil
}

// upLongEnough is checkIfClusterUpLongEnoughWithRecoveryState.
func (pc *pace) upLongEnough(min time.Duration, action string) error {
	if !pc.supports {
		return nil
	}
	if s := pc.st.Cluster.RecoveryState.SecondsSinceLastRecovered; s < min.Seconds() {
		return fmt.Errorf("cannot: %s, clusters last recovery was %0.2f seconds ago, waiting until the last recovery was %0.0f seconds ago", action, s, min.Seconds())
	}
	return nil
}

// canExclude is CanSafelyExcludeProcessesWithRecoveryState.
func (pc *pace) canExclude() error {
	if err := pc.defaultSafety("exclude processes"); err != nil {
		return err
	}
	return pc.upLongEnough(pc.p.MinimumRecoveryTimeForExclusion, "exclude processes")
}

// canInclude is CanSafelyIncludeProcesses.
func (pc *pace) canInclude() error {
	if err := pc.defaultSafety("include processes"); err != nil {
		return err
	}
	if err := pc.upLongEnough(pc.p.MinimumRecoveryTimeForInclusion, "include processes"); err != nil {
		return err
	}
	if n := pc.st.Cluster.RecoveryState.Name; n != "fully_recovered" && n != "all_logs_recruited" {
		return fmt.Errorf("cannot: include processes, cluster recovery state is %s, but it must be \"fully_recovered\" or \"all_logs_recruited\"", n)
	}
	return nil
}

// canChangeCoordinators is CanSafelyChangeCoordinators: missing coordinators wait the shorter
// minimum and skip the default safety checks.
func (pc *pace) canChangeCoordinators(missing int) error {
	if missing > 0 {
		return pc.upLongEnough(pc.p.MinimumUptimeForCoordinatorChangeWithMissingProcess,
			fmt.Sprintf("change coordinators: cluster has %d missing coordinators", missing))
	}
	if err := pc.defaultSafety("change coordinators"); err != nil {
		return err
	}
	return pc.upLongEnough(pc.p.MinimumUptimeForCoordinatorChangeWithUndesiredProcess, "change coordinators: cluster is not up for long enough")
}
