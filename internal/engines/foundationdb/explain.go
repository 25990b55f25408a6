package foundationdb

import (
	"context"
	"fmt"
	"strings"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Explain implements ops.Explainer: the restart gate's checks (checkStatus, checkCR, the
// operator's lock key) on one read of status json, each as its own line, read-only. Scale and
// replace gate on the same status json and FoundationDBCluster, so they get the same lines.
func (e *Engine) Explain(ctx context.Context, c *ops.Cluster, _ string) ([]ops.Check, error) {
	st, via, err := e.StatusFrom(ctx, e.cli(), c, nil)
	if err != nil {
		return []ops.Check{{Name: "status-json", Detail: fmt.Sprintf("cannot read the status of %s/%s: %v", c.Namespace, c.Name, err),
			Fix: "make a pod Ready to run fdbcli in; see kubectl dbops status " + c.Name}}, nil
	}
	g := &gate{e: e, c: c, plan: st, replicas: replicasOf(st), checker: readChecker(Resource(c))}
	var out []ops.Check
	// The maintenance zone first, on its own line: checkStatus is given it as "own" so that
	// its other checks still run and show.
	zone := st.Cluster.MaintenanceZone
	if zone == "" {
		out = append(out, ops.Check{Name: "maintenance-zone", OK: true, Detail: "no maintenance zone set"})
	} else {
		out = append(out, ops.Check{Name: "maintenance-zone", Detail: foreignZone(st).Error(), Fix: clearZoneFix(c, via, zone)})
	}
	out = append(out, ops.CheckErr("health", g.checkStatus(st, zone), healthDetail(st, g.replicas),
		"wait until the database is available, fully recovered and at full fault tolerance: kubectl dbops wait "+c.Name+" --for=healthy"))
	out = append(out, ops.CheckErr("operator", g.checkCR(ctx), operatorDetail(c),
		"wait for the operator to reconcile (kubectl get foundationdbcluster -n "+c.Namespace+"), or resume it if paused"))
	if cfg := ReadLockConfig(Resource(c)); Resource(c) != nil && cfg.Use {
		l := e.NewFDBLock(c, cfg)
		out = append(out, ops.CheckErr("fdb-lock-key", l.Check(ctx), "the operator's lock key "+printableKey(cfg.Key())+" is free or expired",
			"wait for the operator's global action to finish (its lock key expires by itself)"))
	}
	return out, nil
}

// clearZoneFix says how to end a maintenance zone nobody is working on any more: fdbcli's
// `maintenance off` (fdbcli/MaintenanceCommand.actor.cpp in apple/foundationdb), run in a pod
// of the cluster, after making sure it is stale.
func clearZoneFix(c *ops.Cluster, via, zone string) string {
	return fmt.Sprintf("if zone %s is stale (no kubectl dbops run holds the lock: kubectl dbops lock status %s; no operator or engineer works on it), clear it: kubectl exec -n %s %s -- fdbcli --exec 'maintenance off'; else wait for it to expire",
		zone, c.Name, c.Namespace, via)
}

func healthDetail(st *Status, replicas int) string {
	minRem := -1
	if d := st.Cluster.Data; d != nil {
		for _, tr := range d.TeamTrackers {
			if minRem < 0 || tr.State.MinReplicasRemaining < minRem {
				minRem = tr.State.MinReplicasRemaining
			}
		}
	}
	return fmt.Sprintf("available, %s, min_replicas_remaining %d of %d, coordinators reachable", st.RecoveryName(), minRem, replicas)
}

func operatorDetail(c *ops.Cluster) string {
	if Resource(c) == nil {
		return "no FoundationDBCluster (StatefulSet layout): no operator to race"
	}
	return "FoundationDBCluster reconciled, not paused, no coordinator change pending"
}

// Diagnostics implements ops.Diagnoser: status json as fdbcli prints it, from a Ready pod.
func (e *Engine) Diagnostics(ctx context.Context, c *ops.Cluster) []ops.Diagnostic {
	var errs []string
	for _, p := range ReadyPods(c, nil) {
		out, err := e.cli().Run(ctx, c.Namespace, p.Name, "status json")
		if err == nil {
			return []ops.Diagnostic{{Name: "status.json", Data: []byte(out)}}
		}
		errs = append(errs, p.Name+": "+err.Error())
		if len(errs) == 2 || ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		errs = append(errs, "no Ready pod to run fdbcli in")
	}
	return []ops.Diagnostic{{Name: "status.json", Err: fmt.Errorf("fdbcli status json: %s", strings.Join(errs, "; "))}}
}
