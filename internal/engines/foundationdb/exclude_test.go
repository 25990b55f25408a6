package foundationdb

import (
	"strings"
	"testing"
)

// TestParseExclude: fdbcli 7.3's exclude lines (fdbcli/ExcludeCommand.actor.cpp) confirm an
// exclusion only when every address is "Successfully excluded"; in progress, missing, an
// unmatched locality or an error line is not a confirmation, and a coordinator warning is read.
func TestParseExclude(t *testing.T) {
	ok := "  10.0.0.5:4501  ---- Successfully excluded. It is now safe to remove this process from the cluster.\n"
	for _, tc := range []struct {
		name   string
		out    string
		want   bool
		why    string
		coords []string
	}{
		{name: "excluded", out: "Waiting for state to be removed from all excluded servers. This may take a while.\n" + ok, want: true},
		{name: "whole machine", out: "  10.0.0.5(Whole machine)  ---- Successfully excluded. It is now safe to remove this machine from the cluster.\n", want: true},
		{name: "coordinator", out: ok + "WARNING: 10.0.0.5:4501 is a coordinator!\nType `help coordinators' for information on how to change the\ncluster's coordination servers before removing them.\n",
			want: true, coords: []string{"10.0.0.5:4501"}},
		{name: "in progress", out: ok + "  10.0.0.6:4501  ---- WARNING: Exclusion in progress! It is not safe to remove this process from the cluster\n", why: "10.0.0.6:4501"},
		{name: "missing", out: "  10.0.0.7:4501  ---- WARNING: Missing from cluster! Be sure that you excluded the correct processes before removing them from the cluster!\n", why: "Missing from cluster"},
		{name: "no locality match", out: "  locality_instance_id:fdb-4  ---- WARNING: Currently no servers found with this locality match! Be sure that you excluded the correct locality.\n", why: "locality_instance_id:fdb-4"},
		{name: "error on exit 0", out: "ERROR: 'x' is neither a valid network endpoint address nor a locality\n", why: "neither a valid"},
		{name: "nothing", out: "", why: "no address line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := parseExclude(tc.out)
			got, why := r.confirmed()
			if got != tc.want || !strings.Contains(why, tc.why) {
				t.Fatalf("confirmed %v (%q), want %v (%q)", got, why, tc.want, tc.why)
			}
			if strings.Join(r.Coordinators, ",") != strings.Join(tc.coords, ",") {
				t.Fatalf("coordinators %v, want %v", r.Coordinators, tc.coords)
			}
		})
	}
}
