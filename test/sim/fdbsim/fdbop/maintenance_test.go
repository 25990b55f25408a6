package fdbop

import (
	"bytes"
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

func checkerModel(t *testing.T) (*Operator, *fdbsim.Cluster, *fdbsim.ManualClock) {
	t.Helper()
	clock := fdbsim.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var specs []fdbsim.ProcessSpec
	for i, z := range []string{"z1", "z2", "z3"} {
		n := string(rune('1' + i))
		specs = append(specs,
			fdbsim.ProcessSpec{ID: "storage-" + n, Address: "10.0.1." + n + ":4501", Class: fdbsim.ClassStorage, Zone: z},
			fdbsim.ProcessSpec{ID: "log-" + n, Address: "10.0.2." + n + ":4501", Class: fdbsim.ClassLog, Zone: z},
			fdbsim.ProcessSpec{ID: "stateless-" + n, Address: "10.0.3." + n + ":4501", Class: fdbsim.ClassStateless, Zone: z})
	}
	model, err := fdbsim.New(clock, fdbsim.Config{RedundancyMode: "triple", RestartDelay: 10 * time.Second}, specs, []string{"10.0.1.1:4501", "10.0.1.2:4501", "10.0.1.3:4501"})
	if err != nil {
		t.Fatal(err)
	}
	host := fdbsim.NewHost(clock)
	return New(nil, nil, host, Options{}), model, clock
}

func fdbcli(t *testing.T, m *fdbsim.Cluster, line string) string {
	t.Helper()
	var o, e bytes.Buffer
	if code := m.Run(context.Background(), []string{"--exec", line, "--timeout", "10"}, &o, &e); code != 0 {
		t.Fatalf("fdbcli %q: exit %d\n%s%s", line, code, o.String(), e.String())
	}
	return o.String()
}

// register writes a maintenance-list entry as the operator's SetProcessesUnderMaintenance does.
func register(t *testing.T, m *fdbsim.Cluster, id string, at time.Time) {
	t.Helper()
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, at.Unix())
	val := ""
	for _, c := range b.Bytes() {
		val += `\x` + strings.ToLower(string("0123456789ABCDEF"[c>>4])+string("0123456789ABCDEF"[c&15]))
	}
	fdbcli(t, m, `option on ACCESS_SYSTEM_KEYS; writemode on; set \xff\x02/org.foundationdb.kubernetes-operator/maintenance/`+id+" "+val)
}

func operatorOffs(m *fdbsim.Cluster) int {
	n := 0
	for _, e := range m.Log() {
		if e.Client == "operator" && e.Command == "maintenance off" {
			n++
		}
	}
	return n
}

func TestMaintenanceChecker(t *testing.T) {
	on := true
	checker := &maintenanceOptions{}
	checker.AutomationOptions.MaintenanceModeOptions.UseMaintenanceModeChecker = &on
	storage := map[string]bool{"storage-1": true, "storage-2": true, "storage-3": true}
	ctx := context.Background()

	t.Run("off: a zone is left alone", func(t *testing.T) {
		op, m, _ := checkerModel(t)
		fdbcli(t, m, "maintenance on z1 600")
		op.checkMaintenance(ctx, m, &maintenanceOptions{}, storage, &lockSpec{})
		if z, _ := m.MaintenanceZone(); z != "z1" || operatorOffs(m) != 0 {
			t.Fatalf("zone %q, operator offs %d", z, operatorOffs(m))
		}
	})
	t.Run("a zone nobody listed is cleared at once", func(t *testing.T) {
		op, m, _ := checkerModel(t)
		fdbcli(t, m, "maintenance on z1 600")
		op.checkMaintenance(ctx, m, checker, storage, &lockSpec{})
		if z, _ := m.MaintenanceZone(); z != "" || operatorOffs(m) != 1 {
			t.Fatalf("zone %q, operator offs %d", z, operatorOffs(m))
		}
	})
	t.Run("a listed process keeps the zone until it restarted", func(t *testing.T) {
		op, m, clock := checkerModel(t)
		clock.Advance(time.Minute)
		register(t, m, "storage-1", clock.Now())
		fdbcli(t, m, "maintenance on z1 600")
		op.checkMaintenance(ctx, m, checker, storage, &lockSpec{})
		if z, _ := m.MaintenanceZone(); z != "z1" {
			t.Fatalf("zone cleared before storage-1 restarted")
		}
		clock.Advance(2 * time.Second)
		fdbcli(t, m, "kill; kill 10.0.1.1:4501")
		op.checkMaintenance(ctx, m, checker, storage, &lockSpec{})
		if z, _ := m.MaintenanceZone(); z != "z1" {
			t.Fatalf("zone cleared while storage-1 is down")
		}
		clock.Advance(10 * time.Second) // back after the restart delay (the kill itself waited 3 s)
		op.checkMaintenance(ctx, m, checker, storage, &lockSpec{})
		if z, _ := m.MaintenanceZone(); z != "" {
			t.Fatalf("zone %q not cleared after storage-1 restarted", z)
		}
		if left := m.KV("\xff\x02/org.foundationdb.kubernetes-operator/maintenance/"); len(left) != 0 {
			t.Fatalf("finished entry not removed: %v", left)
		}
		if d := m.DegradedStorage(); len(d) != 0 {
			t.Fatalf("storage degraded: %v", d)
		}
	})
	t.Run("an entry of a removed process group is stale", func(t *testing.T) {
		op, m, clock := checkerModel(t)
		register(t, m, "storage-9", clock.Now())
		fdbcli(t, m, "maintenance on z1 600")
		op.checkMaintenance(ctx, m, checker, storage, &lockSpec{})
		if z, _ := m.MaintenanceZone(); z != "" {
			t.Fatalf("zone kept for a process group that does not exist")
		}
		if !slices.ContainsFunc(m.Log(), func(e fdbsim.LogEntry) bool {
			return e.Client == "operator" && strings.HasPrefix(e.Command, "clear ") && strings.HasSuffix(e.Command, "/storage-9")
		}) {
			t.Fatalf("stale entry not cleared: %v", m.Log())
		}
	})
}
