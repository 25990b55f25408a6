package tui

import (
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

func TestStepTimesLines(t *testing.T) {
	for _, tc := range []struct {
		name  string
		times []ops.StepTime
		want  string
	}{
		{"none", nil, ""},
		{"no gate", []ops.StepTime{{Step: "s", Target: "cluster", Took: time.Second}}, ""},
		{"gates", []ops.StepTime{{Step: "restart/a", Target: "a", Gate: 3100 * time.Millisecond}, {Step: "restart/b", Gate: 250 * time.Millisecond}},
			"T gate time (pods Ready to step done): a 3.1s, restart/b 250ms\n"},
		{"catch-up", []ops.StepTime{{Target: "etcd-0", Gate: time.Second, CatchUp: 40 * time.Millisecond}},
			"T gate time (pods Ready to step done): etcd-0 1s\nT catch-up time (pod Ready to raft index at the leader's): etcd-0 40ms\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stepTimesLines("T", tc.times); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestProgressTextBytes(t *testing.T) {
	if got := progressText(&ops.Progress{Done: 3 << 29, Total: 3 << 30, Unit: "bytes"}); got != "1.5 GiB/3.0 GiB" {
		t.Errorf("bytes progress %q", got)
	}
	if got := progressText(&ops.Progress{Done: 12, Total: 40, Unit: "shards"}); got != "12/40 shards" {
		t.Errorf("shards progress %q", got)
	}
}
