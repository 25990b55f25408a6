package cratedb

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// guardDB records the statements sent to it.
type guardDB struct{ execs, queries []string }

func (d *guardDB) Query(_ context.Context, sql string, _ ...any) ([][]any, error) {
	d.queries = append(d.queries, sql)
	return nil, nil
}
func (d *guardDB) Exec(_ context.Context, sql string, _ ...any) error {
	d.execs = append(d.execs, sql)
	return nil
}
func (d *guardDB) Alive() bool                   { return true }
func (d *guardDB) Close(_ context.Context) error { return nil }

type guardConnector struct{ db *guardDB }

func (c guardConnector) Connect(context.Context, *ops.Cluster, Credentials, []string) (DB, string, error) {
	return c.db, "crate-0", nil
}

type guardExec struct{ n int }

func (g *guardExec) Exec(context.Context, string, string, string, []string, io.Reader) ([]byte, []byte, error) {
	g.n++
	return nil, nil, nil
}

// TestStatementsPassTheWriteGuard: a run that lost its lock (the executor's write guard
// refuses) sends no statement that changes the cluster, neither over pgwire (allocation,
// exclusions, node checks, users) nor through crash in a pod (license, system user); reads
// still go out.
func TestStatementsPassTheWriteGuard(t *testing.T) {
	lost := errors.New("lock lost")
	ctx := kube.WithWriteGuard(context.Background(), func() error { return lost })
	db := &guardDB{}
	s := &session{connector: guardConnector{db}, cluster: &ops.Cluster{Namespace: "ns", Name: "crate"},
		creds: func(context.Context) (Credentials, error) { return Credentials{User: SystemUser}, nil }}
	for _, q := range []string{sqlAllocPrimaries, sqlAllocReset, sqlSetExclusions("crate-data-2"), sqlResetExclusion, sqlAckNodeCheck, sqlGrantAll("u")} {
		if err := s.exec(ctx, nil, q); !errors.Is(err, lost) {
			t.Errorf("exec %q with the lock lost: %v, want the guard's error", q, err)
		}
	}
	if len(db.execs) != 0 {
		t.Fatalf("statements sent after the lock was lost: %q", db.execs)
	}
	if _, err := s.query(ctx, nil, sqlNodeCount); err != nil || len(db.queries) != 1 {
		t.Fatalf("a read with the lock lost: %v, %q; want it sent", err, db.queries)
	}
	if err := s.exec(kube.WithWriteGuard(context.Background(), func() error { return nil }), nil, sqlAllocReset); err != nil || len(db.execs) != 1 {
		t.Fatalf("exec with the lock held: %v, %q", err, db.execs)
	}

	ex := &guardExec{}
	cr := &crasher{e: &Engine{execer: ex}, c: &ops.Cluster{Namespace: "ns", Name: "crate"}, argv: []string{"crash"}}
	for _, stmt := range []string{crashSetLicense("k"), crashCreateUser(SystemUser, "pw"), crashGrantAll(SystemUser)} {
		if _, err := cr.run(ctx, stmt, "OK", []string{"pw", "k"}); !errors.Is(err, lost) {
			t.Errorf("crash %q with the lock lost: %v, want the guard's error", redact(stmt, "pw", "k"), err)
		}
	}
	if ex.n != 0 {
		t.Fatalf("%d crash exec(s) after the lock was lost", ex.n)
	}
}

// A statement the write guard refused (the run lost its lock) is not retried as a transient
// database error: the refusal never changes, so the first one ends the wait.
func TestLockLostIsNotRetried(t *testing.T) {
	e := &Engine{cfg: Config{PollErrors: 15}}
	calls := 0
	lost := ops.Lockedf("lost the lock on cluster ns/crate: denied")
	err := e.pollDBBackoff(t.Context(), nil, time.Millisecond, 2*time.Millisecond, func() (bool, error) {
		calls++
		return false, lost
	})
	if !errors.Is(err, ops.ErrLocked) || calls != 1 || strings.Contains(err.Error(), "in a row") {
		t.Fatalf("after %d attempt(s): %v; want the lock error after one", calls, err)
	}
}
