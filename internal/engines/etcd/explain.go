package etcd

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Explain implements ops.Explainer with the restart preflight itself (preflight.go), run
// twice: as a resumed run checks (quorum only) and as a new one (every member healthy), so
// the quorum margin and the members' health are separate lines that cannot drift from it.
func (e *Engine) Explain(ctx context.Context, c *ops.Cluster, _ string) ([]ops.Check, error) {
	s, st, err := e.prepare(ctx, c)
	if err != nil {
		if s == nil {
			return nil, err
		}
		return []ops.Check{{Name: "members", Detail: fmt.Sprintf("cannot read etcd membership of %s/%s: %v", c.Namespace, c.Name, err),
			Fix: "make a member's pod Ready; see kubectl dbops status " + c.Name}}, nil
	}
	g := &restartGate{e: e, s: s, batch: map[string][]string{}}
	quorum := g.Preflight(ctx, c, ops.PreflightState{Resuming: true})
	out := []ops.Check{ops.CheckErr("quorum", quorum, st.Summary(),
		"bring members back until a majority is healthy (kubectl dbops status "+c.Name+" names them); no procedure runs without quorum")}
	members := g.Preflight(ctx, c, ops.PreflightState{})
	fix := "repair the unhealthy member with kubectl dbops replace (the refusal names the command)"
	out = append(out, ops.CheckErr("members", members, "every member healthy", fix))
	return out, nil
}

// Diagnostics implements ops.Diagnoser: the members' endpoint status and health as read by
// etcdctl (the same reading status and the gates use).
func (e *Engine) Diagnostics(ctx context.Context, c *ops.Cluster) []ops.Diagnostic {
	_, st, err := e.prepare(ctx, c)
	if err != nil {
		return []ops.Diagnostic{{Name: "endpoint-status.json", Err: err}}
	}
	b, err := json.MarshalIndent(st, "", "  ")
	return []ops.Diagnostic{{Name: "endpoint-status.json", Data: b, Err: err}}
}
