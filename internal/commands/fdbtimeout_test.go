package commands

import (
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// --fdb-timeout becomes the FoundationDB engine's fdbcli --timeout (whole seconds), 40 s unless
// given, as the operator's MaxCliTimeout.
func TestFDBTimeoutReachesTheEngine(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want int
	}{
		{nil, 40},
		{[]string{"--fdb-timeout", "7s"}, 7},
		{[]string{"--fdb-timeout", "2m"}, 120},
	} {
		o := NewGlobalOptions(genericiooptions.NewTestIOStreamsDiscard())
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		if err := o.Validate(); err != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		if got := o.fdbOptions().Timeout; got != tt.want {
			t.Fatalf("%q: fdbcli timeout %d, want %d", tt.args, got, tt.want)
		}
	}
}
