package cratedb

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// stubDB answers the reads of checkMasterRemoval: sys.nodes and the elected master.
type stubDB struct {
	nodes  []string
	master string
}

func (d stubDB) Query(_ context.Context, sql string, _ ...any) ([][]any, error) {
	switch sql {
	case sqlNodes:
		var rows [][]any
		for _, n := range d.nodes {
			rows = append(rows, []any{"id-" + n, n, n, "", "5.10.1"})
		}
		return rows, nil
	case sqlMasterNode:
		return [][]any{{d.master}}, nil
	}
	return nil, errors.New("stubDB: unexpected query " + sql)
}
func (stubDB) Exec(context.Context, string, ...any) error { return errors.New("stubDB: no writes") }
func (stubDB) Alive() bool                                { return true }
func (stubDB) Close(context.Context) error                { return nil }

type stubConnector struct{ db stubDB }

func (s stubConnector) Connect(context.Context, *ops.Cluster, Credentials, []string) (DB, string, error) {
	return s.db, "", nil
}

// TestMasterRemovalNeedsAMajority: removing one of n master-eligible nodes is refused when
// the nodes that stay would be no majority of the voting configuration (n = 2: one voter of
// two), with every other condition met; n = 3 keeps two of three. Plans never reach n < 4
// (--master and a master-eligible data group need at least 3), so the rule is tested here.
func TestMasterRemovalNeedsAMajority(t *testing.T) {
	for _, tt := range []struct {
		remaining []string
		want      string
	}{
		{[]string{"master-0"}, "with 2 master-eligible nodes the voting configuration has 2, and 1 of them would not be a majority"},
		{[]string{"master-0", "master-1"}, ""},
	} {
		client := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "user-system-db", Namespace: "prod"},
			Data: map[string][]byte{DefaultPasswordKey: []byte("pw")}})
		var pods []string
		for _, n := range tt.remaining {
			pod := "db-" + n
			pods = append(pods, pod)
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: "prod"},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
			if _, err := client.CoreV1().Pods("prod").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		db := stubDB{nodes: append([]string{"master-9"}, tt.remaining...), master: "master-0"}
		e, err := New(ops.EngineDeps{Client: client}, Config{Connector: stubConnector{db}})
		if err != nil {
			t.Fatal(err)
		}
		c := &ops.Cluster{Name: "db", Namespace: "prod"}
		err = e.checkMasterRemoval(context.Background(), nil, c, masterRemoval{pod: "db-master-9", node: "master-9", remainingPods: pods, remainingNodes: tt.remaining})
		if tt.want == "" {
			if err != nil {
				t.Errorf("%d remaining: %v", len(tt.remaining), err)
			}
			continue
		}
		if ops.ExitCode(err) != ops.ExitPrecondition || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%d remaining: err = %v, want exit 5 with %q", len(tt.remaining), err, tt.want)
		}
	}
}
