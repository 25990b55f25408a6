//go:build e2e

package e2e

// End-to-end tests of kubectl-dbops' read-only commands and of kubectl's plugin discovery.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// Case 5: status reports the discovered cluster with every pod Ready and its zone, in JSON
// and in text.
func TestStatus(t *testing.T) {
	ns := newNamespace(t)
	pods := createDBCluster(t, ns, webCluster, 3)
	env := cliEnv(t)

	// Each pod's zone, from its node.
	wantZone := map[string]string{}
	for _, p := range pods {
		node, err := bed.Client.CoreV1().Nodes().Get(t.Context(), p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get node %s: %v", p.Spec.NodeName, err)
		}
		wantZone[p.Name] = node.Labels[testbed.ZoneLabel]
	}

	res := runCLI(t, env, "status", webCluster, "-n", ns, "-o", "json")
	if res.Code != 0 {
		t.Fatalf("status -o json: want exit 0: %s", res)
	}
	var st struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Cluster    struct {
			Name, Namespace, Engine, Layout string
			Groups                          []struct {
				Name  string `json:"name"`
				Ready int32  `json:"ready"`
				Pods  []struct {
					Name  string `json:"name"`
					Ready bool   `json:"ready"`
					Zone  string `json:"zone"`
					Node  string `json:"node"`
					UID   string `json:"uid"`
				} `json:"pods"`
			} `json:"groups"`
		} `json:"cluster"`
		Lock struct {
			Held   bool   `json:"held"`
			Holder string `json:"holder"`
		} `json:"lock"`
	}
	if err := decodeOneJSON(res.Stdout, &st); err != nil {
		t.Fatalf("status -o json does not parse: %v\n%s", err, res)
	}
	if st.Kind != "ClusterStatus" || st.Cluster.Name != webCluster || st.Cluster.Namespace != ns || st.Cluster.Engine != "generic" || st.Cluster.Layout != "labels" {
		t.Errorf("status header = %s %s/%s engine %s layout %s, want ClusterStatus %s/%s engine generic layout labels",
			st.Kind, st.Cluster.Namespace, st.Cluster.Name, st.Cluster.Engine, st.Cluster.Layout, ns, webCluster)
	}
	if len(st.Cluster.Groups) != 1 || st.Cluster.Groups[0].Ready != 3 {
		t.Fatalf("groups = %+v, want one group with 3 ready", st.Cluster.Groups)
	}
	seen := map[string]bool{}
	for _, p := range st.Cluster.Groups[0].Pods {
		seen[p.Name] = true
		if !p.Ready {
			t.Errorf("pod %s is not Ready in status", p.Name)
		}
		if p.Zone == "" || p.Zone != wantZone[p.Name] {
			t.Errorf("pod %s zone = %q, want %q (its node's zone)", p.Name, p.Zone, wantZone[p.Name])
		}
	}
	for _, n := range webPods {
		if !seen[n] {
			t.Errorf("status -o json lacks pod %s", n)
		}
	}
	if st.Lock.Held || st.Lock.Holder != "" {
		t.Errorf("lock = %+v, want free", st.Lock)
	}

	res = runCLI(t, env, "status", webCluster, "-n", ns)
	if res.Code != 0 {
		t.Fatalf("status: want exit 0: %s", res)
	}
	for _, want := range append([]string{"Cluster:", ns + "/" + webCluster, "Lock:"}, webPods...) {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("status text lacks %q:\n%s", want, res.Stdout)
		}
	}
	for _, p := range webPods {
		if z := wantZone[p]; !strings.Contains(res.Stdout, z) {
			t.Errorf("status text lacks zone %q of %s:\n%s", z, p, res.Stdout)
		}
	}
}

// Case 4: kubectl finds the binary on PATH as a plugin and runs it against the testbed.
func TestKubectlPlugin(t *testing.T) {
	kubectl := bed.Kubectl() // built with the control plane: the test never depends on the machine's
	ns := newNamespace(t)
	createDBCluster(t, ns, webCluster, 3)

	env := kubectlEnv(t)
	var plugin string // the plugin's path as kubectl plugin list shows it
	for _, kv := range env {
		if path, ok := strings.CutPrefix(kv, "PATH="); ok {
			dir, _, _ := strings.Cut(path, string(os.PathListSeparator))
			plugin = filepath.Join(dir, "kubectl-dbops")
		}
	}
	run := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), kubectl, args...)
		cmd.Env = env
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code := cliExitCode(t, cmd.Run())
		t.Logf("kubectl %s: exit %d", strings.Join(args, " "), code)
		return stdout.String(), stderr.String(), code
	}

	out, errOut, code := run("plugin", "list")
	if code != 0 || !strings.Contains(out, plugin) {
		t.Errorf("kubectl plugin list: exit %d, want 0 and %s listed\nstdout:\n%s\nstderr:\n%s", code, plugin, out, errOut)
	}
	if strings.Contains(errOut, "warning") {
		t.Errorf("kubectl plugin list warns about the plugin:\n%s", errOut)
	}

	out, errOut, code = run("dbops", "status", webCluster, "-n", ns)
	if code != 0 {
		t.Fatalf("kubectl dbops status: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range append([]string{ns + "/" + webCluster}, webPods...) {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl dbops status lacks %q:\n%s", want, out)
		}
	}
	// Exit codes pass through kubectl.
	_, _, code = run("dbops", "status", "nosuch", "-n", ns)
	if code != 2 {
		t.Errorf("kubectl dbops status nosuch: exit %d, want 2", code)
	}
}
