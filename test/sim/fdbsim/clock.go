// Package fdbsim is an independent, strict model of a FoundationDB 7.3 cluster as fdbcli sees
// it, for the tests of the foundationdb engine. It is part of the test bed, not a client: no
// FoundationDB library is linked, and nothing here is derived from the engine's code.
//
// What it models, each from the upstream file named beside it (apple/foundationdb, branch
// release-7.3):
//   - fdbcli's command line and shell (fdbcli/fdbcli.actor.cpp): options, `;`-separated
//     commands echoed as `>>> cmd` when there are several, the abort after a failed command,
//     `--timeout` only with `--exec` and its "Specified timeout reached -- exiting...".
//   - the commands an operator of a cluster uses: status (fdbcli/StatusCommand.actor.cpp),
//     kill (fdbcli/KillCommand.actor.cpp), maintenance (fdbcli/MaintenanceCommand.actor.cpp),
//     exclude and include (fdbcli/ExcludeCommand.actor.cpp, fdbcli/IncludeCommand.actor.cpp),
//     coordinators (fdbcli/CoordinatorsCommand.actor.cpp).
//   - `status json` per documentation/sphinx/source/mr-status-json-schemas.rst.inc, computed as
//     fdbserver/Status.actor.cpp computes the fields used here (fault tolerance, bounce impact,
//     maintenance zone, under_maintenance).
//   - a cluster in time: killed processes come back after a delay with their uptime reset, a
//     kill of a transaction-system process starts a recovery whose states pass in order,
//     a maintenance zone expires after its seconds.
//
// Time is the model's Clock: the real clock in the test bed, a manual one in unit tests, so
// that the 3 seconds fdbcli waits after a kill or a recovery's progress cost no real time.
package fdbsim

import (
	"context"
	"sync"
	"time"
)

// Clock is the model's time. Sleep returns early with ctx's error.
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// RealClock is the wall clock.
type RealClock struct{}

// Now is time.Now.
func (RealClock) Now() time.Time { return time.Now() }

// Sleep waits d or until ctx is done.
func (RealClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ManualClock is a clock for unit tests: Sleep advances it at once.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock starts a manual clock at t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: t} }

// Now is the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Sleep advances the clock by d.
func (c *ManualClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d > 0 {
		c.Advance(d)
	}
	return nil
}
