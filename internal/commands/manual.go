package commands

import (
	"strconv"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// ManEntry is one item of a man page section: a term and what it means.
type ManEntry struct{ Term, Text string }

// ExitStatuses is the EXIT STATUS section of the man pages (hack/gendocs);
// README "Exit codes" says the same, and docs_test.go checks they list the
// same codes.
func ExitStatuses() []ManEntry {
	return []ManEntry{
		{strconv.Itoa(ops.ExitOK), "Done; also a --dry-run plan printed, or nothing left to do."},
		{strconv.Itoa(ops.ExitFailed), "Failed: an API error, a step that failed."},
		{strconv.Itoa(ops.ExitUsage), "Bad usage or input: unknown command, flag or value, an empty or control-character value, no such cluster, context or kubeconfig file, a missing Secret or key, no --yes without a terminal, aborted at the prompt. Nothing was written."},
		{strconv.Itoa(ops.ExitLocked), "The cluster lock is held by someone else, or your lock ID is denied."},
		{strconv.Itoa(ops.ExitTimeout), "Timeout (--timeout or the command's default); the journal is kept, re-run to resume."},
		{strconv.Itoa(ops.ExitPrecondition), "Precondition not met, e.g. the cluster is unhealthy or owned by an operator."},
		{strconv.Itoa(ops.ExitForbidden), "Permission denied: RBAC lacks a verb the plan needs, or the API server refused a request."},
		{strconv.Itoa(ops.ExitPaused), "Stopped as asked: paused by --pause-after, or stopped between steps by 'kubectl dbops abort' (outcome aborted); the journal is kept, re-run the same command to continue."},
		{strconv.Itoa(ops.ExitInterrupted), "Interrupted (Ctrl-C, SIGTERM) at a safe point; the journal is kept, re-run the same command to resume."},
	}
}

// Environment is the ENVIRONMENT section of the man pages.
func Environment() []ManEntry {
	return []ManEntry{
		{"DBOPS_<FLAG>", "Default for a long flag: its name in upper case with - as _, e.g. DBOPS_LOCK_ID, DBOPS_NAMESPACE, DBOPS_NO_TUI=true. Flags win over the environment, the environment over the config file."},
		{"DBOPS_CONFIG", "The config file, when --config is not given."},
		{"XDG_CONFIG_HOME, HOME", "Where the default config file is looked for."},
		{"KUBECONFIG", "The kubeconfig files, as for kubectl."},
		{"BOOTSTRAP_TIMEOUT", "Seconds; bounds bootstrap (default 1800) unless --timeout is given."},
		{"SCALING_TIMEOUT", "Seconds; bounds scale (default 3600) unless --timeout is given."},
		{"NO_COLOR", "Any value disables colours in the terminal UI."},
	}
}

// Files is the FILES section of the man pages.
func Files() []ManEntry {
	return []ManEntry{
		{"$XDG_CONFIG_HOME/kubectl-dbops/config.yaml", "The config file (~/.config/kubectl-dbops/config.yaml without XDG_CONFIG_HOME): its keys are long flag names; an unknown key is a warning."},
		{"~/.kube/config", "The kubeconfig, unless KUBECONFIG or --kubeconfig names others."},
	}
}
