package fdbsim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"
)

// defaultStoredBytes is what each storage server holds (status json roles[].stored_bytes) when
// Config.StoredBytes is zero.
const defaultStoredBytes = 1 << 30

// Has reports whether the model knows a process with this locality_instance_id.
func (c *Cluster) Has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byID(id) != nil
}

// AddProcess joins a new fdbserver process to the cluster: a new worker registers with the
// cluster controller (fdbserver/worker.actor.cpp registrationClient) and is recruited as its
// class allows. A new storage server starts empty and data distribution fills it; the model
// reports it full at once (the rate of filling is not modelled, only the rate of draining).
func (c *Cluster) AddProcess(s ProcessSpec) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.advance(now)
	if s.ID == "" || s.Zone == "" {
		return fmt.Errorf("process %q: ID and zone are required", s.ID)
	}
	if !validAddress(s.Address) {
		return fmt.Errorf("process %s: invalid address %q", s.ID, s.Address)
	}
	if c.byID(s.ID) != nil {
		return fmt.Errorf("process %s exists", s.ID)
	}
	if q := c.byAddress(s.Address); q != nil {
		if q.up {
			return fmt.Errorf("address %s is in use by %s", s.Address, q.spec.ID)
		}
		q.spec.Address = ""
	}
	switch s.Class {
	case ClassStorage, ClassLog, ClassStateless, ClassClusterController:
	default:
		return fmt.Errorf("process %s: unsupported class %q", s.ID, s.Class)
	}
	if s.Machine == "" {
		s.Machine = s.Zone
	}
	c.procs = append(c.procs, &process{spec: s, processID: processIDOf(s.ID), started: now, up: true})
	if c.rec.stalled {
		c.startRecovery(now, true)
	}
	return nil
}

// RemoveProcess forgets a process whose pod and data are gone for good (the operator removed its
// process group). A coordinator is refused: the connection string would name a process that no
// longer exists, which the operator prevents (controllers/remove_process_groups.go blocks the
// removal of a coordinator), so a caller doing it is wrong. A storage process whose data has
// not moved away loses its replicas; data distribution re-replicates them from the other team
// members (the model keeps no per-team data, so only the process disappears).
func (c *Cluster) RemoveProcess(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.advance(now)
	p := c.byID(id)
	if p == nil {
		return fmt.Errorf("no process %s", id)
	}
	if c.isCoordinator(p.spec.Address) {
		return fmt.Errorf("process %s (%s) is a coordinator", id, p.spec.Address)
	}
	wasUp := p.up
	hadRoles := len(c.txnRoles[id]) > 0
	c.lose(p, time.Time{})
	c.procs = slices.DeleteFunc(c.procs, func(q *process) bool { return q == p })
	if wasUp && (hadRoles || !c.quorum()) {
		c.startRecovery(now, true)
	}
	return nil
}

// storedBytes is what a storage process holds at now: StoredBytes, drained at a finite rate
// (StoredBytes per DataMove) from the moment it is excluded (fdbserver/DataDistribution moves
// the shards of an excluded server away; status json roles[].stored_bytes falls as it does).
func (c *Cluster) storedBytes(p *process, now time.Time) int64 {
	total := c.cfg.StoredBytes
	if total == 0 {
		total = defaultStoredBytes
	}
	if p.removedData {
		return 0
	}
	if _, ok := c.excludedBy(p); !ok || p.drainFrom.IsZero() {
		return total // not excluded, or no team to move the data to (teamsBuildable)
	}
	left := 1 - float64(now.Sub(p.drainFrom))/float64(c.cfg.DataMove)
	return int64(float64(total) * min(max(left, 0), 1))
}

// processIDOf is the process's key in status json, derived from its instance ID as New does.
func processIDOf(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:16])
}

func (c *Cluster) isExcluded(p *process) bool {
	_, ex := c.excludedBy(p)
	return ex
}
