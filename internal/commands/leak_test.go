package commands

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// credentialFlags sets every cli-runtime ConfigFlags flag except the two
// the resume hint may carry (-n, --context) to a value holding a marker.
// Names that must resolve (user, cluster, kubeconfig) exist under the
// marker in a kubeconfig written for the test.
func credentialFlags(t *testing.T, marker string) []string {
	t.Helper()
	dir := t.TempDir()
	kc := filepath.Join(dir, marker+"-kubeconfig")
	cfg := testKubeconfig + fmt.Sprintf(`- name: %[1]s-user
  user: {token: %[1]s-token-in-file}
`, marker)
	cfg = strings.Replace(cfg, "clusters:\n", fmt.Sprintf("clusters:\n- name: %s-cluster\n  cluster: {server: \"https://%s.example:6443\"}\n", marker, marker), 1)
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("probe", pflag.ContinueOnError)
	genericclioptions.NewConfigFlags(true).AddFlags(fs)
	var args []string
	fs.VisitAll(func(f *pflag.Flag) {
		switch f.Name {
		case "namespace", "context":
			return
		case "kubeconfig":
			args = append(args, "--kubeconfig="+kc)
		case "user", "cluster":
			args = append(args, "--"+f.Name+"="+marker+"-"+f.Name)
		case "as-user-extra":
			args = append(args, "--as-user-extra="+marker+"-key="+marker+"-value")
		case "cache-dir", "certificate-authority", "client-certificate", "client-key":
			args = append(args, "--"+f.Name+"="+filepath.Join(dir, marker+"-"+f.Name))
		default:
			switch f.Value.Type() {
			case "string", "stringArray", "stringSlice":
				args = append(args, "--"+f.Name+"="+marker+"-"+f.Name)
			case "bool":
				args = append(args, "--"+f.Name+"=true")
			case "duration":
				args = append(args, "--"+f.Name+"=1234s")
			default:
				t.Fatalf("flag --%s of type %s: add it to the test", f.Name, f.Value.Type())
			}
		}
	})
	if len(args) < 15 {
		t.Fatalf("only %d ConfigFlags flags found: %v", len(args), args)
	}
	return args
}

// TestCredentialFlagsNeverPrinted runs commands with every kubectl
// connection and credential flag set to a marker: the marker must not
// appear in stdout, stderr, NDJSON, Events or the Lease, and the resume
// hint must be the request alone, as it can be pasted.
func TestCredentialFlagsNeverPrinted(t *testing.T) {
	const marker = "zq7marker"
	const wantHint = "kubectl dbops restart db -n prod --context staging --lock-id=ci@test --rolling"
	tests := []struct {
		name string
		args []string
		code int
		// want are substrings of stdout.
		want []string
		// lease, when set, is on the cluster before the run.
		lease *coordinationv1.Lease
	}{
		{"plain resume hint", []string{"restart", "db", "--rolling", "--yes", "--timeout", "1s", "--context", "staging", "-n", "prod"}, ops.ExitTimeout,
			[]string{"re-run the same command to resume: " + wantHint + " --yes\n"}, nil},
		{"ndjson resume hint", []string{"restart", "db", "--rolling", "--yes", "--timeout", "1s", "-o", "json", "--context", "staging", "-n", "prod"}, ops.ExitTimeout,
			[]string{`"command":"` + wantHint + `"`, `"resume":"re-run the same command to resume: ` + wantHint + ` --yes"`,
				`"resumeArgv":["kubectl","dbops","restart","db","-n","prod","--context","staging","--lock-id=ci@test","--rolling","--yes"]`}, nil},
		{"dry-run plan", []string{"restart", "db", "--rolling", "--dry-run", "-o", "json", "--context", "staging", "-n", "prod"}, 0,
			[]string{`"command":"` + wantHint + `"`}, nil},
		{"lock status", []string{"lock", "status", "db", "-n", "prod"}, 0, []string{"you are ci@test"}, nil},
		{"lock held by another session", []string{"restart", "db", "--rolling", "--yes", "-n", "prod"}, ops.ExitLocked, nil,
			heldLease("prod", "db", "ci@test", "other-session", "restart --rolling", "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := fakecluster.Objects("prod", "db", "", webObjects()...)
			if tt.lease != nil {
				objs = append(objs, tt.lease)
			}
			h := newHarness(t, objs...)
			ctrl := fakecluster.Start(t, h.client, "prod")
			ctrl.SetHold(true)
			args := append(append([]string{}, tt.args...), credentialFlags(t, marker)...)
			args = append(args, "--lock-id", "ci@test")
			r := h.run(args...)
			if tt.code == ops.ExitLocked && !strings.Contains(r.err, "kubectl dbops lock release db -n prod --id ci@test") {
				t.Errorf("the lock-held hint lacks -n or --id: %s", r.err)
			}
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d; stderr: %s\nstdout: %s", r.code, tt.code, r.err, r.out)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.out)
				}
			}
			assertNoMarker(t, h, r, marker)
		})
	}
}

// heldLease is a lock Lease as another kubectl-dbops process (session)
// holding it as holder would have written it, renewed just now.
func heldLease(ns, cluster, holder, session, operation, reason string) *coordinationv1.Lease {
	now := metav1.NewMicroTime(testNow)
	secs := int32(600)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lock.LeaseName(cluster),
			Labels:      map[string]string{lock.LabelManagedBy: lock.ManagedByValue, lock.LabelCluster: cluster},
			Annotations: map[string]string{lock.AnnotationSession: session, lock.AnnotationOperation: operation}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
	}
	if reason != "" {
		l.Annotations[lock.AnnotationReason] = reason
	}
	return l
}

// assertNoMarker checks stdout, stderr, the Events and the Leases of the
// fake cluster for marker.
func assertNoMarker(t *testing.T, h *harness, r result, marker string) {
	t.Helper()
	if strings.Contains(r.out, marker) {
		t.Errorf("stdout holds the marker:\n%s", r.out)
	}
	if strings.Contains(r.err, marker) {
		t.Errorf("stderr holds the marker:\n%s", r.err)
	}
	events, err := h.client.CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := h.client.CoordinationV1().Leases("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for what, obj := range map[string]any{"Events": events.Items, "Leases": leases.Items} {
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), marker) {
			t.Errorf("%s hold the marker: %s", what, b)
		}
	}
}

// shellSplit splits a command line as a POSIX shell would for the quoting
// ops.ShellQuote produces (plain words and single-quoted strings).
func shellSplit(t *testing.T, line string) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case quoted && r == '\'':
			quoted = false
		case quoted:
			cur.WriteRune(r)
		case r == '\'':
			quoted, inWord = true, true
		case r == '\\' || r == '"' || r == '$' || r == '`':
			t.Fatalf("unexpected shell metacharacter %q in %q", r, line)
		case r == ' ':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unterminated quote in %q", line)
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// TestResumeHintPastes: the hint printed after a timed-out run, pasted as a
// shell would split it, resumes the run where it was printed (it repeats the
// run's --yes): the pod restarted before is skipped and the run succeeds.
func TestResumeHintPastes(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
	ctrl := fakecluster.Start(t, h.client, "prod")
	ctrl.SetHold(true)
	r := h.run("restart", "db", "--rolling", "--yes", "--timeout", "1s", "--lock-id", "ci@test", "--context", "prod", "--token", "s3cr3t")
	if r.code != ops.ExitTimeout {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	_, hint, ok := strings.Cut(r.out, "re-run the same command to resume: ")
	if !ok {
		t.Fatalf("no resume hint:\n%s", r.out)
	}
	hint, _, _ = strings.Cut(hint, "\n")
	words := shellSplit(t, hint)
	if len(words) < 3 || words[0] != "kubectl" || words[1] != "dbops" {
		t.Fatalf("hint %q does not start with kubectl dbops", hint)
	}
	ctrl.SetHold(false)
	ctrl.Flush()
	r = h.run(words[2:]...)
	if r.code != 0 {
		t.Fatalf("pasted hint %q: exit %d: %s\n%s", hint, r.code, r.err, r.out)
	}
	if !strings.Contains(r.out, "resuming restart") || !strings.Contains(r.out, "[1/3] pod/db-web-0 delete the pod, wait for it to come back with a new UID and be Ready: skipped") {
		t.Errorf("the pasted hint did not resume the run:\n%s", r.out)
	}
	if got := ctrl.Deleted(); len(got) != 3 || got[0] != "db-web-0" {
		t.Errorf("deleted %v, want each pod once", got)
	}
}
