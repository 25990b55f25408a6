package commands

import (
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// A stop asked for with --pause-after is not printed as an error; everything else is, on one
// escaped line.
func TestErrorLine(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&ops.CodedError{Kind: ops.ErrPaused, Msg: "paused after 1 step(s) as asked (--pause-after 1); the journal is kept"},
			"paused: paused after 1 step(s) as asked (--pause-after 1); the journal is kept"},
		{ops.Lockedf("cluster prod/db is locked by bob\nforged line"), `error: cluster prod/db is locked by bob\nforged line`},
	} {
		if got := ErrorLine(tc.err); got != tc.want {
			t.Errorf("ErrorLine(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
