package fdbsim

import (
	"context"
	"io"
	"maps"
	"slices"
	"testing"
	"time"
)

// TestClientTraceFiles: fdbcli leaves a client trace file with --log (in --log-dir, else the
// current directory) or with FDB_NETWORK_OPTION_TRACE_ENABLE in its environment (in its value),
// none otherwise, and none when it stops at its options.
func TestClientTraceFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string // "" for none
	}{
		{"plain", []string{"--exec", "status", "--timeout", "5"}, nil, ""},
		{"log-dir without --log", []string{"--log-dir", "/tmp/x", "--exec", "status"}, nil, ""},
		{"--log", []string{"--log", "--exec", "status"}, nil, "trace.1.xml"},
		{"--log --log-dir", []string{"--log", "--log-dir", "/tmp/x", "--exec", "status"}, nil, "/tmp/x/trace.1.xml"},
		{"--log --log_dir", []string{"--log", "--log_dir", "/tmp/x", "--exec", "status"}, nil, "/tmp/x/trace.1.xml"},
		{"operator's container", []string{"--exec", "status"}, OperatorMainContainerEnv("myfdb"), OperatorTraceDir + "/trace.1.xml"},
		{"empty TRACE_ENABLE", []string{"--exec", "status"}, map[string]string{EnvTraceEnable: ""}, "trace.1.xml"},
		{"usage error", []string{"--log", "--bogus"}, OperatorMainContainerEnv("myfdb"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHost(NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
			// An unbound pod, the run cut short: fdbcli sets up its network (and its trace)
			// before it reaches any cluster.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_ = h.ExecEnv(ctx, "demo/p", tc.args, tc.env, io.Discard, io.Discard)
			got := h.TraceFiles("demo/p")
			if tc.want == "" && len(got) != 0 || tc.want != "" && !slices.Equal(got, []string{tc.want}) {
				t.Fatalf("trace files %q, want %q", got, tc.want)
			}
		})
	}
}

// TestEnvCommand: env(1) as the container runs it.
func TestEnvCommand(t *testing.T) {
	base := map[string]string{EnvTraceEnable: "/d", "A": "1"}
	for _, tc := range []struct {
		argv    []string
		cmd     []string
		env     map[string]string
		wantErr bool
	}{
		{[]string{"fdbcli", "--exec", "x"}, []string{"fdbcli", "--exec", "x"}, base, false},
		{[]string{"env", "-u", EnvTraceEnable, "fdbcli", "--exec", "x"}, []string{"fdbcli", "--exec", "x"}, map[string]string{"A": "1"}, false},
		{[]string{"/usr/bin/env", "--unset=A", "B=2", "fdbcli"}, []string{"fdbcli"}, map[string]string{EnvTraceEnable: "/d", "B": "2"}, false},
		{[]string{"env", "-u"}, nil, nil, true},
		{[]string{"env", "-i", "fdbcli"}, nil, nil, true},
		{[]string{"env", "-u", "A"}, nil, nil, true},
	} {
		cmd, env, err := EnvCommand(tc.argv, base)
		if (err != nil) != tc.wantErr || !slices.Equal(cmd, tc.cmd) || !tc.wantErr && !maps.Equal(env, tc.env) {
			t.Errorf("%q: got %q %v %v, want %q %v error %v", tc.argv, cmd, env, err, tc.cmd, tc.env, tc.wantErr)
		}
	}
	if base[EnvTraceEnable] != "/d" || base["A"] != "1" {
		t.Fatalf("EnvCommand changed its input: %v", base)
	}
}
