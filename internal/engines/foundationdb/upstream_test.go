package foundationdb

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// The status documents in testdata/upstream were captured from real FoundationDB clusters by
// the operator's authors (testdata/upstream/README.md): an oracle independent of our simulator,
// so a misreading shared by the engine and the simulator fails here.

func upstreamStatus(t *testing.T, name string) *Status {
	t.Helper()
	b, err := os.ReadFile("testdata/upstream/" + name)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ParseStatus(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return st
}

// TestUpstreamStatusHealthy71: a healthy 7.1 cluster in double redundancy, as the operator lays
// it out (one process per pod, locality_instance_id = process group ID).
func TestUpstreamStatusHealthy71(t *testing.T) {
	st := upstreamStatus(t, "operator_fdb_status_7_1_rc1.json")
	if !st.Available() || !st.Client.DatabaseStatus.Healthy || !st.Cluster.DatabaseAvailable {
		t.Errorf("available/healthy: %+v, database_available %v", st.Client.DatabaseStatus, st.Cluster.DatabaseAvailable)
	}
	if st.RecoveryName() != "fully_recovered" || st.ActiveGenerations() != 1 || st.Cluster.Generation != 2 {
		t.Errorf("recovery %q, active generations %d, generation %d", st.RecoveryName(), st.ActiveGenerations(), st.Cluster.Generation)
	}
	co := st.Client.Coordinators
	if !co.QuorumReachable || len(co.Coordinators) != 3 {
		t.Errorf("coordinators: %+v", co)
	}
	for _, a := range []string{"10.1.18.253:4501", "10.1.18.254:4501", "10.1.19.0:4501"} {
		if !st.IsCoordinator(a) {
			t.Errorf("%s is a coordinator (connection string %s)", a, st.Cluster.ConnectionString)
		}
	}
	if st.IsCoordinator("10.1.19.1:4501") {
		t.Error("10.1.19.1:4501 (log-1) is not a coordinator")
	}
	if len(st.Cluster.Processes) != 8 {
		t.Errorf("%d processes, want 8", len(st.Cluster.Processes))
	}
	ps := st.ByInstance("storage-1")
	if len(ps) != 1 {
		t.Fatalf("process group storage-1: %+v", ps)
	}
	p := ps[0]
	if p.Address != "10.1.18.254:4501" || p.ClassType != "storage" || p.Zone() != "test-cluster-storage-1" || p.Excluded {
		t.Errorf("storage-1: %+v (zone %q)", p, p.Zone())
	}
	if got, want := p.RoleNames(), []string{"coordinator", "grv_proxy", "storage"}; !slices.Equal(got, want) {
		t.Errorf("storage-1 roles %v, want %v", got, want)
	}
	if got := st.ByInstance("log-1")[0].RoleNames(); !slices.Equal(got, []string{"data_distributor", "master", "ratekeeper"}) {
		t.Errorf("log-1 roles %v", got)
	}
	if ex := st.Exclusions(); len(ex) != 0 {
		t.Errorf("exclusions %v", ex)
	}
	if st.Cluster.MaintenanceZone != "" || st.Cluster.MaintenanceSecondsRemaining != nil {
		t.Errorf("maintenance %q %v", st.Cluster.MaintenanceZone, st.Cluster.MaintenanceSecondsRemaining)
	}
	b := st.Cluster.BounceImpact
	if b == nil || b.CanCleanBounce == nil || !*b.CanCleanBounce {
		t.Errorf("bounce_impact %+v", b)
	}
	d := st.Cluster.Data
	if d == nil || d.State.Name != "healthy" || d.State.MinReplicasRemaining == nil || *d.State.MinReplicasRemaining != 2 ||
		len(d.TeamTrackers) != 1 || !d.TeamTrackers[0].Primary || d.TeamTrackers[0].State.MinReplicasRemaining != 2 ||
		d.MovingData.InFlightBytes != 0 || d.MovingData.InQueueBytes != 0 {
		t.Errorf("data %+v", d)
	}
	if l := st.Cluster.Logs; len(l) != 1 || !l[0].Current || l[0].LogReplicationFactor != 2 || l[0].LogFaultTolerance != 1 {
		t.Errorf("logs %+v", l)
	}
	if f := st.Cluster.FaultTolerance; f == nil || f.Data != 1 || f.Availability != 1 {
		t.Errorf("fault_tolerance %+v", f)
	}
	if st.Problems() != "" {
		t.Errorf("problems %q", st.Problems())
	}
	if !healthy(st) || replicasOf(st) != 2 {
		t.Errorf("healthy %v, replicas %d", healthy(st), replicasOf(st))
	}
	g := &gate{c: &ops.Cluster{Namespace: "ns", Name: "test-cluster"}, replicas: replicasOf(st)}
	if err := g.checkStatus(st, ""); err != nil {
		t.Errorf("the restart gate refuses a healthy real cluster: %v", err)
	}
}

// TestUpstreamStatusUnreachableProcess: a triple-redundancy 7.1 cluster over TLS whose tester
// process does not answer: status is incomplete, the client says not healthy, the addresses
// carry ":tls", and the tester is listed without a locality.
func TestUpstreamStatusUnreachableProcess(t *testing.T) {
	st := upstreamStatus(t, "operator_unreachable_test_processes.json")
	if !st.Available() || st.Client.DatabaseStatus.Healthy {
		t.Errorf("database_status %+v, want available and not healthy", st.Client.DatabaseStatus)
	}
	for _, want := range []string{"The cluster has some unreachable processes.", "Unable to retrieve all status information."} {
		if !strings.Contains(st.Problems(), want) {
			t.Errorf("problems %q lack %q", st.Problems(), want)
		}
	}
	if len(st.Client.Coordinators.Coordinators) != 5 || !st.IsCoordinator("100.82.36.166:4500:tls") {
		t.Errorf("coordinators %+v", st.Client.Coordinators)
	}
	if replicasOf(st) != 3 {
		t.Errorf("replicas %d, want 3 (triple)", replicasOf(st))
	}
	var tester []Process
	for _, p := range st.Cluster.Processes {
		if p.ClassType == "test" {
			tester = append(tester, p)
		}
	}
	if len(tester) != 1 || tester[0].Address != "100.82.115.41:4500:tls" || tester[0].InstanceID() != "" || tester[0].Zone() != "" {
		t.Errorf("tester %+v", tester)
	}
	if n := len(st.ByInstance("")); n != 1 {
		t.Errorf("ByInstance(\"\") = %d processes, want only the tester", n)
	}
	// Two processes per pod (4500 and 4502) share a process group.
	var multi int
	seen := map[string]int{}
	for _, p := range st.Cluster.Processes {
		if id := p.InstanceID(); id != "" {
			seen[id]++
			if seen[id] == 2 {
				multi++
			}
		}
	}
	if multi == 0 {
		t.Errorf("no process group with two processes: %v", seen)
	}
	// Like the operator (controllers/bounce_processes.go restarts the cluster controller for
	// an unreachable tester), the gate does not refuse on an unreachable tester alone.
	g := &gate{c: &ops.Cluster{Namespace: "ns", Name: "fdb"}, replicas: replicasOf(st)}
	if err := g.checkStatus(st, ""); err != nil {
		t.Errorf("gate: %v", err)
	}
}

// TestLockTupleAsFDBTupleSpec: the operator's lock value is an FDB tuple; its encoding follows
// the test cases of FoundationDB's tuple specification (apple/foundationdb design/tuple.md at
// 7.3.63): pack(u"F\u00d4O\u0000bar") == b'\x02F\xc3\x94O\x00\xffbar\x00',
// pack(-5551212) == b'\x11\xabK\x93', -1 is 0x13 0xfe, zero is 0x14.
func TestLockTupleAsFDBTupleSpec(t *testing.T) {
	tests := []struct {
		v    LockValue
		want string
	}{
		{LockValue{Owner: "F\u00d4O\x00bar", Start: -5551212, End: -1}, "\x02F\xc3\x94O\x00\xffbar\x00" + "\x11\xabK\x93" + "\x13\xfe"},
		{LockValue{Owner: "", Start: 0, End: 0}, "\x02\x00" + "\x14" + "\x14"},
	}
	for _, tt := range tests {
		got := EncodeLockValue(tt.v)
		if string(got) != tt.want {
			t.Errorf("EncodeLockValue(%+v) = %q, want %q", tt.v, got, tt.want)
		}
		back, err := DecodeLockValue([]byte(tt.want))
		if err != nil || back != tt.v {
			t.Errorf("DecodeLockValue(%q) = %+v, %v; want %+v", tt.want, back, err, tt.v)
		}
	}
}

// TestReplicasOfEveryRedundancyMode: the storage replicas of each redundancy_mode status json
// may report (the "$enum" of FoundationDB's status schema), as FoundationDB's configure sets
// them (apple/foundationdb fdbclient/ManagementAPI.actor.cpp configForToken at 7.3.63;
// documentation/sphinx/source/configuration.rst: three_datacenter "Data is replicated 6
// times"). The restart gate and the removal checks require this many replicas remaining.
func TestReplicasOfEveryRedundancyMode(t *testing.T) {
	for mode, want := range map[string]int{"single": 1, "double": 2, "triple": 3, "three_datacenter": 6,
		"three_datacenter_fallback": 4, "three_data_hall": 3, "three_data_hall_fallback": 2} {
		st, err := ParseStatus([]byte(`{"cluster":{"configuration":{"redundancy_mode":"` + mode + `"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := replicasOf(st); got != want {
			t.Errorf("replicasOf(%s) = %d, want %d", mode, got, want)
		}
	}
}
