package replicated

import (
	"context"
	"errors"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
)

// TestRoleCommandsPassTheWriteGuard: a run that lost its lock (the executor's write guard
// refuses) runs no command that stops, seeds or promotes a database, whichever step sends it;
// the read-only commands (sequence, status) still run.
func TestRoleCommandsPassTheWriteGuard(t *testing.T) {
	f := newFixture(t, 3, nil, testConfig)
	f.app.seq = map[string]string{"db-0": "1", "db-1": "2", "db-2": "3"}
	c := f.cluster()
	s, err := newSite(c)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.eng.config(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	lost := errors.New("lock lost")
	ctx := kube.WithWriteGuard(context.Background(), func() error { return lost })
	for _, name := range []string{CmdSeed, CmdPrimary, CmdSecondary, CmdStop} {
		if _, _, err := f.eng.run(ctx, nil, s, cfg, name, "db-1", nil); !errors.Is(err, lost) {
			t.Errorf("%s with the lock lost: %v, want the guard's error", name, err)
		}
	}
	if m := f.app.mutations(); len(m) != 0 {
		t.Fatalf("commands run after the lock was lost: %q", m)
	}
	for _, name := range []string{CmdSequence, CmdStatus} {
		if _, _, err := f.eng.run(ctx, nil, s, cfg, name, "db-1", nil); err != nil {
			t.Errorf("%s (a read) with the lock lost: %v, want it run", name, err)
		}
	}
	if n := len(f.app.all()); n != 2 {
		t.Fatalf("%d command(s) run, want the 2 reads: %q", n, f.app.all())
	}
}
