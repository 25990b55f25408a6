package fdbsim

import (
	"fmt"
	"io"
	fpath "path"
	"slices"
	"strings"
)

// Client trace files of fdbcli. fdbcli traces when started with --log
// (fdbcli/fdbcli.cpp main: opt.trace sets the TRACE_ENABLE network option to --log-dir, the
// current directory when that is empty) and, whatever its flags, when its environment has
// FDB_NETWORK_OPTION_TRACE_ENABLE: the multi-version client reads every FDB_NETWORK_OPTION_*
// variable when the network is set up (fdbclient/MultiVersionTransaction.cpp
// loadEnvironmentVariableNetworkOptions; fdbcli only ignores CLIENT_THREADS_PER_VERSION), and
// the value, empty meaning the current directory, is where the trace files go. The operator
// sets that variable in its pods' main container with the unified image, its default
// (fdb-kubernetes-operator internal/pod_models.go configureContainersForUnifiedImages:
// FDB_NETWORK_OPTION_TRACE_ENABLE=/var/log/fdb-trace-logs, with
// FDB_NETWORK_OPTION_TRACE_LOG_GROUP; api/v1beta2 UseUnifiedImage), so fdbcli run there by exec leaves a trace file in the
// pod's log volume per run unless the variable is removed from its environment.

// EnvTraceEnable is the environment variable that makes the FDB client trace.
const EnvTraceEnable = "FDB_NETWORK_OPTION_TRACE_ENABLE"

// OperatorTraceDir is the trace directory the operator sets in its pods' main container.
const OperatorTraceDir = "/var/log/fdb-trace-logs"

// OperatorMainContainerEnv is the FDB_NETWORK_OPTION_* environment of the operator's main
// container for cluster (internal/pod_models.go; GetLogGroup defaults to the cluster name).
func OperatorMainContainerEnv(cluster string) map[string]string {
	return map[string]string{EnvTraceEnable: OperatorTraceDir, "FDB_NETWORK_OPTION_TRACE_LOG_GROUP": cluster}
}

// traceDir is the directory fdbcli with args and env writes a client trace file into, and
// whether it writes one. fdbcli that stops at its options (usage, version) sets up no network.
func traceDir(args []string, env map[string]string) (string, bool) {
	if _, _, _, done := parseOptions(args, io.Discard, io.Discard); done {
		return "", false
	}
	dir, on := "", false
	for i := 0; i < len(args); i++ {
		switch name := "--" + strings.ReplaceAll(strings.TrimPrefix(args[i], "--"), "_", "-"); name {
		case "--log":
			on = true
		case "--log-dir":
			if i+1 < len(args) {
				dir = args[i+1]
				i++
			}
		}
	}
	if v, ok := env[EnvTraceEnable]; ok {
		// Set up after the flags: the environment's directory is the one used.
		dir, on = v, true
	}
	if dir == "" {
		dir = "."
	}
	return dir, on
}

// recordTrace notes the trace file fdbcli run in pod with args and env writes, if any.
func (h *Host) recordTrace(pod string, args []string, env map[string]string) {
	dir, on := traceDir(args, env)
	if !on {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.traces[pod] = append(h.traces[pod], fpath.Join(dir, fmt.Sprintf("trace.%d.xml", len(h.traces[pod])+1)))
}

// TraceFiles are the client trace files fdbcli runs left in pod ("namespace/name").
func (h *Host) TraceFiles(pod string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.traces[pod])
}

// AllTraceFiles are the client trace files fdbcli runs left, by pod.
func (h *Host) AllTraceFiles() map[string][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string][]string{}
	for p, f := range h.traces {
		out[p] = slices.Clone(f)
	}
	return out
}

// EnvCommand is what a container runs for argv with environment env: argv itself, or, when
// argv runs env(1) (coreutils: `env [-u NAME]... [NAME=VALUE]... COMMAND [ARG]...`), COMMAND
// with env changed accordingly. Stricter than env(1): any other option is refused, as is env
// without a command (which would print the environment).
func EnvCommand(argv []string, env map[string]string) ([]string, map[string]string, error) {
	if len(argv) == 0 || fpath.Base(argv[0]) != "env" {
		return argv, env, nil
	}
	out := map[string]string{}
	for k, v := range env {
		out[k] = v
	}
	i := 1
	for ; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "-u" || a == "--unset":
			if i+1 >= len(argv) {
				return nil, nil, fmt.Errorf("env: option requires an argument -- 'u'")
			}
			i++
			delete(out, argv[i])
		case strings.HasPrefix(a, "--unset="):
			delete(out, strings.TrimPrefix(a, "--unset="))
		case a == "--":
			i++
			goto vars
		case strings.HasPrefix(a, "-"):
			return nil, nil, fmt.Errorf("env: option %q is not modelled", a)
		default:
			goto vars
		}
	}
vars:
	for ; i < len(argv); i++ {
		k, v, ok := strings.Cut(argv[i], "=")
		if !ok {
			break
		}
		out[k] = v
	}
	if i >= len(argv) {
		return nil, nil, fmt.Errorf("env: no command (it would print the environment)")
	}
	return argv[i:], out, nil
}
