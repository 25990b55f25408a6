package replicated

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

func TestParseAndResolve(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		wantErr   string
	}{
		{"yaml", testConfig, ""},
		{"json", `{"commands":{"sequence":{"argv":["s"]},"primary":{"argv":["p"],"timeout":"2m"}}}`, ""},
		{"empty", "", ""},
		{"unknown key", "primaries: 1\ncomands: {}", `unknown field "comands"`},
		{"unknown command", "commands: {promote: {argv: [x]}}", `unknown command "promote"`},
		{"empty argv", "commands: {primary: {argv: []}}", "commands.primary.argv is empty"},
		{"blank program", `commands: {primary: {argv: [""]}}`, "commands.primary.argv is empty"},
		{"bad timeout", "commands: {primary: {argv: [p], timeout: soon}}", `"soon" is not a duration`},
		{"zero timeout", "commands: {primary: {argv: [p], timeout: 0}}", "must be positive"},
		{"negative timeout", "commands: {primary: {argv: [p], timeout: -5s}}", "must be positive"},
		{"negative primaries", "primaries: -1", "must not be negative"},
		{"not yaml", "commands: [", "not valid JSON or YAML"},
		{"null command", "commands: {primary: }", "commands.primary is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseLayer([]byte(tc.doc), "test")
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || ops.ExitCode(err) != ops.ExitUsage {
				t.Fatalf("error = %v (exit %d), want usage error containing %q", err, ops.ExitCode(err), tc.wantErr)
			}
		})
	}
}

func TestResolvePrecedenceFieldByField(t *testing.T) {
	hi, err := ParseLayer([]byte("commands: {primary: {timeout: 10s}}"), "env")
	if err != nil {
		t.Fatal(err)
	}
	mid, err := ParseLayer([]byte("primaries: 3\ncommands: {primary: {argv: [file-primary]}, sequence: {argv: [seq]}}"), "file")
	if err != nil {
		t.Fatal(err)
	}
	lo, err := ParseLayer([]byte("primaries: 5\ncontainer: app\ncommands: {primary: {argv: [ann], timeout: 1m}, stop: {argv: [stop]}}"), "annotation")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Resolve(PrimariesLayer(2, "--primaries"), hi, mid, lo)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Primaries != 2 || cfg.Container != "app" {
		t.Errorf("primaries/container = %d/%q", cfg.Primaries, cfg.Container)
	}
	if p := cfg.Commands[CmdPrimary]; p == nil || p.Argv[0] != "file-primary" || p.Timeout != 10*time.Second {
		t.Errorf("primary = %+v, want file argv with env timeout", p)
	}
	if s := cfg.Commands[CmdSequence]; s == nil || s.Timeout != DefaultQueryTimeout {
		t.Errorf("sequence = %+v, want default timeout", s)
	}
	if cfg.Has(CmdSeed) || !cfg.Has(CmdStop) {
		t.Errorf("seed/stop configured = %v/%v", cfg.Has(CmdSeed), cfg.Has(CmdStop))
	}
	if err := cfg.Require(CmdSequence, CmdPrimary, CmdSecondary); err == nil || !strings.Contains(err.Error(), "secondary") {
		t.Errorf("Require = %v", err)
	}
	// Defaults alone: one primary, nothing configured.
	cfg, err = Resolve()
	if err != nil || cfg.Primaries != 1 || len(cfg.Commands) != 0 {
		t.Errorf("defaults = %+v, %v", cfg, err)
	}
	// A timeout with no argv anywhere is malformed.
	if _, err := Resolve(hi); err == nil || ops.ExitCode(err) != ops.ExitUsage {
		t.Errorf("timeout without argv: %v", err)
	}
}

func TestRankTieBreakNumericOrdinals(t *testing.T) {
	var ms []member
	seqs := map[string]seq{}
	for _, o := range []int{10, 3, 2, 11, 0} {
		m := member{Name: "db-" + itoa(o), Ordinal: o}
		ms = append(ms, m)
	}
	seqs["db-10"] = seq{Value: 9, OK: true}
	seqs["db-2"] = seq{Value: 9, OK: true}
	seqs["db-3"] = seq{Value: 4, OK: true}
	seqs["db-11"] = seq{Note: "exit 1"}
	seqs["db-0"] = seq{Value: 4, OK: true}
	got := names(rank(ms, seqs))
	want := []string{"db-2", "db-10", "db-0", "db-3", "db-11"}
	if !slices.Equal(got, want) {
		t.Errorf("rank = %v, want %v", got, want)
	}
	got = names(stopOrder(ms, seqs))
	slices.Reverse(want)
	if !slices.Equal(got, want) {
		t.Errorf("stopOrder = %v, want %v", got, want)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestBootstrapGoldenAndRun(t *testing.T) {
	f := newFixture(t, 3, nil, testConfig)
	f.app.seq = map[string]string{"db-0": "5", "db-1": "7", "db-2": "7"}
	p, err := f.eng.PlanBootstrap(context.Background(), f.cluster(), BootstrapRequest{Primaries: ptr.To[int32](2)})
	if err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "bootstrap-3-primaries-2.txt", planText(t, p))
	if w := fakecluster.Writes(f.client); len(w) != 0 {
		t.Fatalf("planning wrote %v", w)
	}
	f.client.ClearActions()
	if err := f.run(p); err != nil {
		t.Fatal(err)
	}
	// Each slot's candidates and each role command's pod come from the run's one pod
	// informer, which has seen every role label set before the next slot reads it.
	if got := fakecluster.PodReads(f.client); got != "list 1, get 0" {
		t.Errorf("pod reads during the run: %s, want list 1, get 0 (the run's informer)", got)
	}
	want := []string{"db-1: seed", "db-2: primary db-1.db-hl.prod.svc", "db-0: secondary db-1.db-hl.prod.svc db-2.db-hl.prod.svc"}
	if got := f.app.mutations(); !slices.Equal(got, want) {
		t.Errorf("commands = %q, want %q", got, want)
	}
	if got := f.roles(); got["db-0"] != RoleSecondary || got["db-1"] != RolePrimary || got["db-2"] != RolePrimary {
		t.Errorf("roles = %v", got)
	}
	// Idempotent: a second bootstrap has nothing to do.
	p, err = f.eng.PlanBootstrap(context.Background(), f.cluster(), BootstrapRequest{Primaries: ptr.To[int32](2)})
	if err != nil || len(p.Steps) != 0 {
		t.Fatalf("second plan = %d steps, %v", len(p.Steps), err)
	}
}

func TestBootstrapTieGoesToOrdinal2Not10(t *testing.T) {
	f := newFixture(t, 11, nil, testConfig)
	for o := range 11 {
		f.app.seq["db-"+itoa(o)] = itoa(o % 5)
	}
	f.app.seq["db-2"], f.app.seq["db-10"] = "42", "42"
	p, err := f.eng.PlanBootstrap(context.Background(), f.cluster(), BootstrapRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Steps[0].Target != "pod/db-2" {
		t.Errorf("first primary planned on %s, want pod/db-2", p.Steps[0].Target)
	}
	if err := f.run(p); err != nil {
		t.Fatal(err)
	}
	if got := f.app.mutations(); len(got) == 0 || got[0] != "db-2: seed" {
		t.Errorf("first command = %v, want seed on db-2", got)
	}
	if r := f.roles(); r["db-2"] != RolePrimary || r["db-10"] != RoleSecondary {
		t.Errorf("roles = %v", r)
	}
}

func TestSeedFailureTriesNextCandidate(t *testing.T) {
	f := newFixture(t, 3, nil, testConfig)
	f.app.seq = map[string]string{"db-0": "9", "db-1": "3", "db-2": "5"}
	f.app.failOn("seed", "db-0")
	p, err := f.eng.PlanBootstrap(context.Background(), f.cluster(), BootstrapRequest{Primaries: ptr.To[int32](1)})
	if err != nil {
		t.Fatal(err)
	}
	err = f.run(p)
	// db-0 failed and is excluded: one secondary slot cannot be filled.
	if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), "no candidate left for secondary 2") {
		t.Fatalf("run = %v (exit %d), want no candidate for the second secondary", err, ops.ExitCode(err))
	}
	want := []string{"db-0: seed", "db-0: stop", "db-2: seed", "db-1: secondary db-2.db-hl.prod.svc"}
	if got := f.app.mutations(); !slices.Equal(got, want) {
		t.Errorf("commands = %q, want %q", got, want)
	}
	if r := f.roles(); r["db-0"] != RoleFailed || r["db-2"] != RolePrimary || r["db-1"] != RoleSecondary {
		t.Errorf("roles = %v", r)
	}
	if len(f.deleted) != 0 {
		t.Errorf("deleted %v, want none (stop worked)", f.deleted)
	}
}

func TestStopFailureDeletesPod(t *testing.T) {
	cfg := strings.Replace(testConfig, "  secondary: {argv: [/bin/secondary]}\n", "", 1)
	f := newFixture(t, 3, nil, cfg)
	f.app.seq = map[string]string{"db-0": "1", "db-1": "8", "db-2": "5"}
	f.app.failOn("seed", "db-1")
	f.app.failOn("stop", "db-1")
	old := f.uid("db-1")
	p, err := f.eng.PlanBootstrap(context.Background(), f.cluster(), BootstrapRequest{Primaries: ptr.To[int32](2)})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.run(p); err != nil {
		t.Fatal(err)
	}
	want := []string{"db-1: seed", "db-1: stop", "db-2: seed", "db-0: primary db-2.db-hl.prod.svc"}
	if got := f.app.mutations(); !slices.Equal(got, want) {
		t.Errorf("commands = %q, want %q", got, want)
	}
	if !slices.Equal(f.deleted, []string{"db-1"}) {
		t.Errorf("deleted = %v, want db-1", f.deleted)
	}
	if f.uid("db-1") == old {
		t.Error("db-1 has its old UID; want a recreated pod")
	}
	if r := f.roles(); r["db-1"] != "" || r["db-2"] != RolePrimary || r["db-0"] != RolePrimary {
		t.Errorf("roles = %v (the recreated pod has no role)", r)
	}
}

func TestScaleUpAddsSecondaries(t *testing.T) {
	f := newFixture(t, 3, map[string]string{"db-0": RolePrimary, "db-1": RolePrimary, "db-2": RolePrimary}, testConfig)
	f.app.seq = map[string]string{"db-0": "4", "db-1": "4", "db-2": "4", "db-3": "0", "db-4": "0"}
	p, err := f.eng.PlanScale(context.Background(), f.cluster(), ops.ScaleRequest{Replicas: ptr.To[int32](5), Primaries: ptr.To[int32](3)})
	if err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "scale-3-to-5-primaries-3.txt", planText(t, p))
	if err := f.run(p); err != nil {
		t.Fatal(err)
	}
	prim := "db-0.db-hl.prod.svc db-1.db-hl.prod.svc db-2.db-hl.prod.svc"
	want := []string{"db-3: secondary " + prim, "db-4: secondary " + prim}
	if got := f.app.mutations(); !slices.Equal(got, want) {
		t.Errorf("commands = %q, want %q", got, want)
	}
	if r := f.roles(); r["db-3"] != RoleSecondary || r["db-4"] != RoleSecondary || len(r) != 5 {
		t.Errorf("roles = %v", r)
	}
	if r := *f.sts().Spec.Replicas; r != 5 {
		t.Errorf("replicas = %d", r)
	}
}

func TestScaleDownStopsTheRightPods(t *testing.T) {
	roles := map[string]string{"db-0": RolePrimary, "db-1": RolePrimary, "db-2": RolePrimary, "db-3": RoleSecondary, "db-4": RoleSecondary}
	f := newFixture(t, 5, roles, testConfig)
	// db-0 and db-2 tie for the lowest number: the higher ordinal stops.
	f.app.seq = map[string]string{"db-0": "6", "db-1": "9", "db-2": "6", "db-3": "5", "db-4": "5"}
	p, err := f.eng.PlanScale(context.Background(), f.cluster(), ops.ScaleRequest{Replicas: ptr.To[int32](3), Primaries: ptr.To[int32](2)})
	if err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "scale-5-to-3-primaries-2.txt", planText(t, p))
	if !p.Destructive {
		t.Error("scale-down plan not destructive")
	}
	if err := f.run(p); err != nil {
		t.Fatal(err)
	}
	want := []string{"db-4: stop", "db-3: stop", "db-2: stop", "db-2: secondary db-0.db-hl.prod.svc db-1.db-hl.prod.svc"}
	if got := f.app.mutations(); !slices.Equal(got, want) {
		t.Errorf("commands = %q, want %q", got, want)
	}
	if r := f.roles(); r["db-0"] != RolePrimary || r["db-1"] != RolePrimary || r["db-2"] != RoleSecondary || len(r) != 3 {
		t.Errorf("roles = %v", r)
	}
}

func TestBadConfigurationRunsNothing(t *testing.T) {
	for _, tc := range []struct {
		name, annotation string
		seq              string
		want             string
		sequenceRuns     bool
	}{
		{"no primary command", "commands: {sequence: {argv: [/bin/sequence]}}", "1", "missing required command(s) primary", false},
		{"no sequence command", "commands: {primary: {argv: [/bin/primary]}}", "1", "missing required command(s) sequence", false},
		{"empty argv", "commands: {sequence: {argv: [/bin/sequence]}, primary: {argv: []}}", "1", "commands.primary.argv is empty", false},
		{"bad timeout", "commands: {sequence: {argv: [/bin/sequence], timeout: 1x}, primary: {argv: [p]}}", "1", "commands.sequence.timeout", false},
		{"not a number", testConfig, "seven", `printed "seven"`, true},
		{"negative number", testConfig, "-3", `printed "-3"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 3, nil, tc.annotation)
			f.app.seq = map[string]string{"db-0": "1", "db-1": tc.seq, "db-2": "1"}
			_, err := f.eng.PlanBootstrap(context.Background(), f.cluster(), BootstrapRequest{})
			if ops.ExitCode(err) != ops.ExitUsage || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("bootstrap = %v (exit %d), want usage error with %q", err, ops.ExitCode(err), tc.want)
			}
			_, err = f.eng.PlanScale(context.Background(), f.cluster(), ops.ScaleRequest{Replicas: ptr.To[int32](4)})
			if ops.ExitCode(err) != ops.ExitUsage {
				t.Fatalf("scale = %v, want usage error", err)
			}
			if m := f.app.mutations(); len(m) != 0 {
				t.Errorf("ran %v", m)
			}
			if !tc.sequenceRuns && len(f.app.all()) != 0 {
				t.Errorf("exec'd %v before rejecting the configuration", f.app.all())
			}
			if w := fakecluster.Writes(f.client); len(w) != 0 {
				t.Errorf("wrote %v", w)
			}
		})
	}
}

func TestBootstrapRefusesUnsettledStatefulSet(t *testing.T) {
	f := newFixture(t, 3, nil, testConfig)
	c := f.cluster()
	c.Groups[0].Desired = 4
	_, err := f.eng.PlanBootstrap(context.Background(), c, BootstrapRequest{})
	if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), "missing db-3") {
		t.Fatalf("got %v, want precondition naming db-3", err)
	}
	if len(f.app.all()) != 0 {
		t.Errorf("exec'd %v", f.app.all())
	}
}

func TestRestartSecondariesFirstRolesRestored(t *testing.T) {
	roles := map[string]string{"db-0": RolePrimary, "db-1": RoleSecondary, "db-2": RolePrimary, "db-3": RoleSecondary}
	f := newFixture(t, 4, roles, testConfig)
	f.app.seq = map[string]string{"db-0": "1", "db-1": "1", "db-2": "1", "db-3": "1"}
	p, err := f.eng.PlanRestart(context.Background(), f.cluster(), ops.RestartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "restart-roles.txt", planText(t, p))
	f.client.ClearActions()
	if err := f.run(p); err != nil {
		t.Fatal(err)
	}
	// Giving roles back reads the members from the run's one pod informer.
	if got := fakecluster.PodReads(f.client); got != "list 1, get 0" {
		t.Errorf("pod reads during the run: %s, want list 1, get 0 (the run's informer)", got)
	}
	if want := []string{"db-1", "db-3", "db-0", "db-2"}; !slices.Equal(f.deleted, want) {
		t.Errorf("restart order = %v, want %v", f.deleted, want)
	}
	want := []string{
		"db-1: secondary db-0.db-hl.prod.svc db-2.db-hl.prod.svc",
		"db-3: secondary db-0.db-hl.prod.svc db-2.db-hl.prod.svc",
		"db-0: primary db-2.db-hl.prod.svc",
		"db-2: primary db-0.db-hl.prod.svc",
	}
	if got := f.app.mutations(); !slices.Equal(got, want) {
		t.Errorf("commands = %q, want %q", got, want)
	}
	for pod, role := range roles {
		if got := f.roles()[pod]; got != role {
			t.Errorf("%s role = %q after restart, want %q", pod, got, role)
		}
	}
}

func TestHealthTable(t *testing.T) {
	f := newFixture(t, 3, map[string]string{"db-0": RolePrimary, "db-2": RoleFailed}, testConfig)
	f.app.seq = map[string]string{"db-0": "3", "db-1": "2"}
	h, err := f.eng.Health(context.Background(), f.cluster())
	if err != nil {
		t.Fatal(err)
	}
	if h.Status != "degraded" || h.Message != "1 primaries (want 1), 0 secondaries, 1 failed" {
		t.Errorf("health = %s: %s", h.Status, h.Message)
	}
	want := [][]string{{"db-0", "primary", "3", "ok"}, {"db-1", "-", "2", "ok"}, {"db-2", "failed", "none (exit 2)", "ok"}}
	for i, row := range want {
		if !slices.Equal(h.Table.Rows[i], row) {
			t.Errorf("row %d = %v, want %v", i, h.Table.Rows[i], row)
		}
	}
}

// A run interrupted while seeding resumes on the pod it chose, even when the
// sequence numbers now point elsewhere: the election is not run again.
func TestBootstrapResumesJournaledElection(t *testing.T) {
	cfg := strings.Replace(testConfig, "  secondary: {argv: [/bin/secondary]}\n", "", 1)
	f := newFixture(t, 3, nil, cfg)
	f.app.seq = map[string]string{"db-0": "5", "db-1": "9", "db-2": "7"}
	locker := &memLocker{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.app.hook = func(pod, cmd string) error {
		if cmd == "seed" {
			cancel() // Ctrl-C while the seed command runs
			return context.Canceled
		}
		return nil
	}
	p, err := f.eng.PlanBootstrap(context.Background(), f.cluster(), BootstrapRequest{})
	if err != nil {
		t.Fatal(err)
	}
	err = (&ops.Executor{Locker: locker, LockID: "test"}).Run(ctx, p)
	if ops.ExitCode(err) != ops.ExitInterrupted {
		t.Fatalf("first run = %v (exit %d), want interrupted", err, ops.ExitCode(err))
	}
	if got := locker.journal.Data[slotKey(RolePrimary, 1)]; got != "db-1" {
		t.Fatalf("journaled first primary = %q, want db-1", got)
	}
	f.app.hook = nil
	f.app.seq["db-2"] = "20"
	p, err = f.eng.PlanBootstrap(context.Background(), f.cluster(), BootstrapRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&ops.Executor{Locker: locker, LockID: "test"}).Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if got, want := f.app.mutations(), []string{"db-1: seed", "db-1: seed"}; !slices.Equal(got, want) {
		t.Errorf("commands = %q, want %q", got, want)
	}
	if r := f.roles(); r["db-1"] != RolePrimary || r["db-2"] != "" {
		t.Errorf("roles = %v", r)
	}
}

func TestCommandErrorText(t *testing.T) {
	f := newFixture(t, 1, nil, testConfig)
	f.app.failOn("seed", "db-0")
	cfg, err := f.eng.config(f.cluster(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newSite(f.cluster())
	_, _, err = f.eng.run(context.Background(), nil, s, cfg, CmdSeed, "db-0", []string{"x"})
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Code != 1 {
		t.Fatalf("err = %#v", err)
	}
	if got, want := err.Error(), "seed command in pod db-0 exited with code 1: seed failed on purpose"; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	if strings.Contains(err.Error(), "/bin/seed") {
		t.Error("error text shows argv")
	}
}

func TestScaleToNoPrimariesRefusedWithSecondaries(t *testing.T) {
	f := newFixture(t, 2, map[string]string{"db-0": RolePrimary, "db-1": RoleSecondary}, testConfig)
	f.app.seq = map[string]string{"db-0": "1", "db-1": "1"}
	_, err := f.eng.PlanScale(context.Background(), f.cluster(), ops.ScaleRequest{Primaries: ptr.To[int32](0)})
	if ops.ExitCode(err) != ops.ExitUsage || !strings.Contains(err.Error(), "without a primary") {
		t.Fatalf("got %v", err)
	}
	if m := f.app.mutations(); len(m) != 0 {
		t.Errorf("ran %v", m)
	}
}

// hangingExec hangs the commands named in hang (pod: cmd) until their
// context ends, like a command stuck in a container; other calls go to app.
// Every call records which pods the fixture had deleted by then.
type hangingExec struct {
	app  *fakeApp
	f    *fixture
	hang map[string]bool

	mu    sync.Mutex
	calls []string // "pod: cmd (deleted: ...)"
	// ended are hung commands timeout(1) killed in the pod, running those the client gave up
	// on while they ran on; noTimeout models an image without timeout(1).
	ended, running []string
	noTimeout      bool
}

func (h *hangingExec) Exec(ctx context.Context, ns, pod, container string, argv []string, stdin io.Reader) ([]byte, []byte, error) {
	inner, limit, wrapped := inPodTimeout(argv)
	if wrapped && h.noTimeout {
		// The image has no timeout binary: the runtime cannot start the exec.
		return nil, []byte(`OCI runtime exec failed: exec failed: unable to start container process: exec: "timeout": executable file not found in $PATH: unknown`),
			&kube.ExitError{Namespace: ns, Pod: pod, Container: container, Code: 126}
	}
	cmd := path.Base(inner[0])
	h.f.mu.Lock()
	deleted := strings.Join(h.f.deleted, ",")
	h.f.mu.Unlock()
	h.mu.Lock()
	h.calls = append(h.calls, fmt.Sprintf("%s: %s (deleted: %s)", pod, cmd, deleted))
	h.mu.Unlock()
	if h.hang[pod+": "+cmd] {
		if wrapped {
			// timeout(1) kills the command in the container, which ends the exec.
			select {
			case <-time.After(limit):
				h.mu.Lock()
				h.ended = append(h.ended, pod+": "+cmd)
				h.mu.Unlock()
				return nil, nil, &kube.ExitError{Namespace: ns, Pod: pod, Container: container, Code: 137}
			case <-ctx.Done():
			}
		} else {
			<-ctx.Done()
		}
		// The client gave up; nothing ended the command in the container.
		h.mu.Lock()
		h.running = append(h.running, pod+": "+cmd)
		h.mu.Unlock()
		return nil, nil, ctx.Err()
	}
	return h.app.Exec(ctx, ns, pod, container, argv, stdin)
}

// TestQueryTimeoutEndsCommandInPod: a sequence or status command that times out is ended in
// the pod (run under timeout(1)), not left running; in a container without timeout(1) the
// engine still works and says the command may run on.
func TestQueryTimeoutEndsCommandInPod(t *testing.T) {
	cfg := `
primaries: 1
commands:
  sequence: {argv: [/bin/sequence], timeout: 1s}
  primary: {argv: [/bin/primary]}
  secondary: {argv: [/bin/secondary]}
  stop: {argv: [/bin/stop]}
  status: {argv: [/bin/status], timeout: 1s}
`
	for _, tc := range []struct {
		name      string
		noTimeout bool
		want      string
	}{
		{"ended by timeout(1)", false, "sequence command in pod db-1 did not finish within 1s and was ended in the pod"},
		{"no timeout(1) in the image", true, "sequence command in pod db-1 did not finish within 1s; it may still run in the pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 3, map[string]string{"db-0": RolePrimary}, cfg)
			f.app.seq = map[string]string{"db-0": "3", "db-1": "2", "db-2": "1"}
			h := &hangingExec{app: f.app, f: f, hang: map[string]bool{"db-1: sequence": true}, noTimeout: tc.noTimeout}
			f.eng.Exec = h
			s, err := newSite(f.cluster())
			if err != nil {
				t.Fatal(err)
			}
			c, err := f.eng.config(f.cluster(), nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = f.eng.run(context.Background(), nil, s, c, CmdSequence, "db-1", nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if tc.noTimeout {
				if len(h.running) != 1 {
					t.Errorf("running %v, want the hung command reported as left running", h.running)
				}
				return
			}
			if len(h.running) != 0 || !slices.Equal(h.ended, []string{"db-1: sequence"}) {
				t.Errorf("ended %v, still running %v; want the hung sequence ended in the pod", h.ended, h.running)
			}
		})
	}
}

// TestPrimaryTimeoutStopsPodBeforeNextCandidate: a primary command that
// hangs past its timeout may still complete in the container, so its pod is
// deleted (and gone) before any other pod is promoted, and no stop is run
// against the hung pod.
func TestPrimaryTimeoutStopsPodBeforeNextCandidate(t *testing.T) {
	cfg := `
primaries: 1
commands:
  sequence: {argv: [/bin/sequence], timeout: 5s}
  primary: {argv: [/bin/primary], timeout: 200ms}
  secondary: {argv: [/bin/secondary]}
  stop: {argv: [/bin/stop]}
`
	f := newFixture(t, 3, nil, cfg)
	f.app.seq = map[string]string{"db-0": "9", "db-1": "5", "db-2": "3"}
	h := &hangingExec{app: f.app, f: f, hang: map[string]bool{"db-0: primary": true}}
	f.eng.Exec = h
	old := f.uid("db-0")
	p, err := f.eng.PlanBootstrap(context.Background(), f.cluster(), BootstrapRequest{Primaries: ptr.To[int32](1)})
	if err != nil {
		t.Fatal(err)
	}
	err = f.run(p)
	if err != nil && !strings.Contains(err.Error(), "no candidate left for secondary") {
		t.Fatalf("run: %v", err)
	}
	var mut []string
	for _, c := range h.calls {
		if !strings.Contains(c, ": sequence") {
			mut = append(mut, c)
		}
	}
	want := []string{"db-0: primary (deleted: )", "db-1: primary (deleted: db-0)"}
	if len(mut) < 2 || !slices.Equal(mut[:2], want) {
		t.Fatalf("calls = %q, want to start with %q", mut, want)
	}
	for _, c := range mut {
		if strings.HasPrefix(c, "db-0: stop") {
			t.Errorf("stop ran in db-0 although its pod was stopped: %q", mut)
		}
	}
	if f.uid("db-0") == old {
		t.Error("db-0 still has its old UID; want it deleted and recreated")
	}
	if r := f.roles(); r["db-1"] != RolePrimary || r["db-0"] == RolePrimary {
		t.Errorf("roles = %v, want db-1 the only primary", r)
	}
}
