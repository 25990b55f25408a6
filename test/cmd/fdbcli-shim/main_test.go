package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
)

func TestShimRunsFdbcliOfItsPod(t *testing.T) {
	clock := fdbsim.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	host := fdbsim.NewHost(clock)
	c, err := fdbsim.New(clock, fdbsim.Config{}, []fdbsim.ProcessSpec{
		{ID: "storage-1", Address: "10.0.0.1:4501", Class: fdbsim.ClassStorage, Zone: "z1"},
		{ID: "log-1", Address: "10.0.0.2:4501", Class: fdbsim.ClassLog, Zone: "z1"},
		{ID: "stateless-1", Address: "10.0.0.3:4501", Class: fdbsim.ClassStateless, Zone: "z1"},
	}, []string{"10.0.0.1:4501"})
	if err != nil {
		t.Fatal(err)
	}
	host.SetCluster("demo/myfdb", c)
	host.BindPod("demo/myfdb-storage-1", "demo/myfdb")
	srv := httptest.NewServer(host.Handler())
	defer srv.Close()

	tests := []struct {
		name           string
		env            map[string]string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"bound pod", map[string]string{"FDBSIM_ADDR": srv.URL, "FDBSIM_POD": "demo/myfdb-storage-1"},
			[]string{"--exec", "bogus; status"}, 1, ">>> bogus\nWARNING: the previous command failed", "ERROR: Unknown command `bogus'"},
		{"unbound pod times out", map[string]string{"FDBSIM_ADDR": srv.URL, "FDBSIM_POD": "demo/other"},
			[]string{"--exec", "status", "--timeout", "3"}, 1, "", "Specified timeout reached -- exiting...\n"},
		{"unbound pod still checks options", map[string]string{"FDBSIM_ADDR": srv.URL, "FDBSIM_POD": "demo/other"},
			[]string{"--timeout", "3"}, 1, "", "ERROR: --timeout may only be specified with --exec\n"},
		{"no simulator configured", map[string]string{}, []string{"--exec", "status"}, 1, "", "FDBSIM_ADDR and FDBSIM_POD must be set"},
		// The client's trace environment reaches the simulator, which notes the trace file.
		{"trace environment", map[string]string{"FDBSIM_ADDR": srv.URL, "FDBSIM_POD": "demo/myfdb-storage-1", fdbsim.EnvTraceEnable: "/var/log/t"},
			[]string{"--exec", "status minimal"}, 0, "The database is", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o, e bytes.Buffer
			var environ []string
			for k, v := range tt.env {
				environ = append(environ, k+"="+v)
			}
			code := run(context.Background(), tt.args, environ, &o, &e)
			if code != tt.code || !strings.Contains(o.String(), tt.stdout) || !strings.Contains(e.String(), tt.stderr) {
				t.Fatalf("code %d stdout %q stderr %q", code, o.String(), e.String())
			}
		})
	}
	if got := host.TraceFiles("demo/myfdb-storage-1"); len(got) != 1 || !strings.HasPrefix(got[0], "/var/log/t/trace.") {
		t.Fatalf("trace files %q, want one in /var/log/t (only the run with the trace environment)", got)
	}
}
