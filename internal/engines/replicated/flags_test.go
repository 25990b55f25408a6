package replicated

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/utils/ptr"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// The engine binds --primaries itself for scale and bootstrap, checks it per verb, refuses it
// beside --master/--data or above --replicas, and fills the request only when it was given on
// the command line (a value from DBOPS_PRIMARIES or the config file reaches the engine through
// ConfigLayers instead).
func TestPrimariesFlags(t *testing.T) {
	three := int32(3)
	for _, tc := range []struct {
		name    string
		verb    string
		args    []string
		own     ops.ScaleRequest
		fromEnv string
		wantErr string
		want    *int32
	}{
		{name: "scale", verb: "scale", args: []string{"--primaries", "2"}, own: ops.ScaleRequest{Replicas: &three}, want: ptr.To[int32](2)},
		{name: "scale zero", verb: "scale", args: []string{"--primaries", "0"}, want: ptr.To[int32](0)},
		{name: "scale negative", verb: "scale", args: []string{"--primaries", "-1"}, wantErr: "--primaries -1: must be at least 0"},
		{name: "scale beside master", verb: "scale", args: []string{"--primaries", "1"}, own: ops.ScaleRequest{Masters: &three},
			wantErr: "--primaries cannot be combined with --master or --data"},
		{name: "scale above replicas", verb: "scale", args: []string{"--primaries", "4"}, own: ops.ScaleRequest{Replicas: &three},
			wantErr: "--primaries 4 is more than --replicas 3"},
		{name: "scale from env", verb: "scale", fromEnv: "2"},
		{name: "bootstrap", verb: "bootstrap", args: []string{"--primaries", "2"}, want: ptr.To[int32](2)},
		{name: "bootstrap zero", verb: "bootstrap", args: []string{"--primaries", "0"}, wantErr: "bootstrap needs at least 1 primary"},
		{name: "bootstrap none", verb: "bootstrap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFlags()
			fs := pflag.NewFlagSet(tc.verb, pflag.ContinueOnError)
			f.AddFlags(tc.verb, fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if tc.fromEnv != "" {
				// As LoadConfig applies DBOPS_PRIMARIES: the value, not "given".
				if err := fs.Lookup("primaries").Value.Set(tc.fromEnv); err != nil {
					t.Fatal(err)
				}
			}
			err := f.Validate(func(string) bool { return false })
			if err == nil && tc.verb == "scale" {
				err = f.CheckScale(tc.own)
			}
			if tc.wantErr != "" {
				if ops.ExitCode(err) != ops.ExitUsage || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want a usage error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got *int32
			if tc.verb == "scale" {
				var req ops.ScaleRequest
				f.FillScale(&req)
				got = req.Primaries
				if (len(f.ScaleFlagsGiven()) > 0) != (tc.want != nil) {
					t.Errorf("ScaleFlagsGiven = %v", f.ScaleFlagsGiven())
				}
			} else {
				var req ops.BootstrapRequest
				f.FillBootstrap(&req)
				got = req.Primaries
			}
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Errorf("primaries = %v, want %v", got, tc.want)
			}
		})
	}
}
