//go:build e2e

package e2e

import (
	"net/url"
	"os"
	"strings"
	"testing"
)

// assertSecretsNotAudited fails when a secret value appears in the test bed API server's
// audit log (test/testbed records every request's URI at Metadata level): raw, or
// query-escaped as exec argv is in a pods/exec request's URI. Call it after the commands that
// used the secrets; it reads the whole log, so it also covers requests of earlier tests.
func assertSecretsNotAudited(t *testing.T, secrets ...string) {
	t.Helper()
	data, err := os.ReadFile(bed.AuditLogPath())
	if err != nil {
		t.Fatalf("read audit log: %v", err)
	}
	if len(data) == 0 {
		t.Fatalf("audit log %s is empty: is auditing on?", bed.AuditLogPath())
	}
	log := string(data)
	for _, s := range secrets {
		if s == "" {
			t.Fatal("assertSecretsNotAudited: empty secret")
		}
		for _, form := range []string{s, url.QueryEscape(s), url.PathEscape(s)} {
			if i := strings.Index(log, form); i >= 0 {
				start, end := max(0, i-200), min(len(log), i+len(form)+50)
				t.Errorf("secret %q appears in the API server's audit log (%s):\n...%s...", s, bed.AuditLogPath(), log[start:end])
				break
			}
		}
	}
}

// TestAuditLogRecordsExecArgv proves the check can fail: an exec whose argv holds a value
// puts it into the audit log, so a secret sent that way would be found.
func TestAuditLogRecordsExecArgv(t *testing.T) {
	const marker = "audit-probe-7c2e1d"
	_ = bed.Client.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name("no-such-pod").
		SubResource("exec").Param("command", "echo").Param("command", marker).Param("stdout", "true").Do(t.Context()).Error()
	data, err := os.ReadFile(bed.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "command="+marker) {
		t.Fatalf("the audit log does not record exec argv; assertSecretsNotAudited would prove nothing")
	}
}
