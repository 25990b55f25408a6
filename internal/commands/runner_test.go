package commands

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// fakeOperation is a command's options whose Run returns err, after ending the NDJSON
// stream itself when endsStream is set (as a run or a dry-run does).
type fakeOperation struct {
	r          *Runner
	err        error
	endsStream bool
	ran        bool
}

func (f *fakeOperation) Complete(*cobra.Command, []string) error { return nil }
func (f *fakeOperation) Validate() error                         { return nil }
func (f *fakeOperation) Run(*cobra.Command) error {
	f.ran = true
	if f.endsStream {
		f.r.streamEnded = true
	}
	return f.err
}

// The runner ends an NDJSON stream with exactly one done event: one for a refusal before the
// run, none when the run ended the stream itself, none on success or for other outputs.
func TestRunnerEndsStreamOnce(t *testing.T) {
	refusal := ops.Usagef("bad input")
	for _, tc := range []struct {
		name       string
		output     string
		err        error
		endsStream bool
		wantDone   int
	}{
		{"refusal", "json", refusal, false, 1},
		{"run ended the stream", "json", errors.New("step failed"), true, 0},
		{"success", "json", nil, false, 0},
		{"text output", "text", refusal, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			streams, _, out, _ := genericiooptions.NewTestIOStreams()
			g := NewGlobalOptions(streams)
			g.Output = tc.output
			r := NewRunner(g)
			op := &fakeOperation{r: r, err: tc.err, endsStream: tc.endsStream}
			cmd := &cobra.Command{Use: "restart"}
			err := r.runE(op)(cmd, []string{"db"})
			if !errors.Is(err, tc.err) || !op.ran {
				t.Fatalf("err = %v (ran %v), want %v", err, op.ran, tc.err)
			}
			if tc.err != nil {
				// A second error on the same runner never adds a second done event.
				_ = r.endStream("restart", "db", refusal)
			}
			done := 0
			for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				if line == "" {
					continue
				}
				var ev ops.Event
				if err := json.Unmarshal([]byte(line), &ev); err != nil {
					t.Fatalf("line %q: %v", line, err)
				}
				if ev.Type == ops.EventDone {
					done++
					if ev.Outcome != ops.OutcomeRefused || ev.Cluster != "db" || ev.ReasonCode != ops.ReasonOf(refusal) {
						t.Errorf("done event = %+v", ev)
					}
				}
			}
			if done != tc.wantDone {
				t.Errorf("%d done events, want %d:\n%s", done, tc.wantDone, out.String())
			}
		})
	}
}
