package cratedb

import (
	"context"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

func TestReplicaCount(t *testing.T) {
	tests := []struct {
		in      string
		n       int
		bounded bool
		err     bool
	}{
		{"1", 1, true, false},
		{"0-1", 0, true, false},
		{"2-all", 2, true, false},
		{"all", 0, false, false},
		{"x", 0, false, true},
		{"-1", 0, false, true},
	}
	for _, tt := range tests {
		n, b, err := replicaCount(tt.in)
		if n != tt.n || b != tt.bounded || (err != nil) != tt.err {
			t.Errorf("replicaCount(%q) = %d, %v, %v", tt.in, n, b, err)
		}
	}
}

func TestRewriteExpected(t *testing.T) {
	tests := []struct{ in, want string }{
		{"-Cgateway.expected_nodes=3", "-Cgateway.expected_nodes=7"},
		{"-Cgateway.expected_data_nodes=3", "-Cgateway.expected_data_nodes=4"},
		{"crate -Cgateway.expected_nodes=3 -Cnode.name=x", "crate -Cgateway.expected_nodes=7 -Cnode.name=x"},
		{"-Cgateway.recover_after_nodes=3", "-Cgateway.recover_after_nodes=3"},
	}
	for _, tt := range tests {
		if got := rewriteExpected(tt.in, 7, 4); got != tt.want {
			t.Errorf("rewriteExpected(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRedactAndQuote(t *testing.T) {
	pw := "it's-secret"
	stmt := crashCreateUser("sys\"x", pw)
	if stmt != `CREATE USER "sys""x" WITH (password = 'it''s-secret');` {
		t.Errorf("statement %s", stmt)
	}
	for _, s := range []string{stmt, "error near " + pw, "echo it''s-secret"} {
		if got := redact(s, pw); strings.Contains(got, "secret") {
			t.Errorf("redact(%q) = %q", s, got)
		}
	}
}

func TestCandidatePods(t *testing.T) {
	c := &ops.Cluster{Groups: []*ops.NodeGroup{
		{Name: "hot", Role: ops.RoleData, MasterEligible: true, Pods: []ops.Pod{{Name: "hot-0"}, {Name: "hot-1"}}},
		{Name: "cold", Role: ops.RoleData, Pods: []ops.Pod{{Name: "cold-0"}}},
	}}
	if got := candidatePods(c, []string{"hot-0"}); !slices.Equal(got, []string{"hot-1", "cold-0"}) {
		t.Errorf("candidates %v", got)
	}
}

func TestTLSConfig(t *testing.T) {
	c := &ops.Cluster{Name: "db", Namespace: "prod"}
	client := fake.NewClientset()
	for _, mode := range []string{"", "disable"} {
		if cfg, err := (&PGConnector{Client: client, SSLMode: mode}).tlsConfig(context.Background(), c); err != nil || cfg != nil {
			t.Errorf("%q: %v %v", mode, cfg, err)
		}
	}
	cfg, err := (&PGConnector{Client: client, SSLMode: "require"}).tlsConfig(context.Background(), c)
	if err != nil || cfg == nil || !cfg.InsecureSkipVerify {
		t.Errorf("require: %v %v", cfg, err)
	}
	_, err = (&PGConnector{Client: client, SSLMode: "verify-full", CA: SecretRef{Name: "ca", Key: "ca.crt"}}).tlsConfig(context.Background(), c)
	if ops.ExitCode(err) != ops.ExitUsage || !strings.Contains(err.Error(), "Secret prod/ca not found") {
		t.Errorf("missing CA secret: %v", err)
	}
}
