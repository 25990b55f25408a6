//go:build e2e

package e2e

// End-to-end: explain and report on a generic cluster of the test bed, read-only.

import (
	"archive/zip"
	"io"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestExplainAndReport: explain says a restart could start (exit 0), then, with the lock
// held by someone else, exits 5 naming the holder and how to take it over; report writes a
// bundle in which the value of a Secret the pods use appears nowhere. Neither changes the
// Lease (same resourceVersion) nor any pod.
func TestExplainAndReport(t *testing.T) {
	const secretValue = "e2e-s3cr3t-7f3a"
	ns := newNamespace(t)
	if _, err := bed.Client.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web-creds"},
		StringData: map[string]string{"password": secretValue}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := createDBCluster(t, ns, webCluster, 3, func(s *appsv1.StatefulSet) {
		c := &s.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "web-creds"}, Key: "password"}}})
	})
	env := cliEnv(t)

	res := runCLI(t, env, "explain", webCluster, "-n", ns)
	if res.Code != 0 || strings.Contains(res.Stdout, "[FAIL]") || !strings.Contains(res.Stdout, "could start now") {
		t.Fatalf("explain on a healthy cluster: %s", res)
	}
	if r := runCLI(t, env, "lock", "acquire", webCluster, "-n", ns, "--id", "bob@e2e", "--reason", "INC-7"); r.Code != 0 {
		t.Fatalf("lock acquire: %s", r)
	}
	lease, err := bed.Client.CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil || len(lease.Items) != 1 {
		t.Fatalf("leases: %v %v", lease, err)
	}
	rv := lease.Items[0].ResourceVersion

	res = runCLI(t, env, "explain", webCluster, "-n", ns)
	if res.Code != 5 || !strings.Contains(res.Stdout, "[FAIL] lock") || !strings.Contains(res.Stdout, "held by bob@e2e") ||
		!strings.Contains(res.Stdout, "kubectl dbops deny add "+webCluster+" bob@e2e") {
		t.Fatalf("explain with the lock held: want exit 5 with the lock line and its fix: %s", res)
	}

	path := filepath.Join(t.TempDir(), "bundle.zip")
	res = runCLI(t, env, "report", webCluster, "-n", ns, "-f", path)
	if res.Code != 0 {
		t.Fatalf("report: %s", res)
	}
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	names := map[string]bool{}
	for _, f := range zr.File {
		names[f.Name] = true
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if strings.Contains(string(b), secretValue) {
			t.Errorf("%s holds the Secret's value", f.Name)
		}
	}
	for _, want := range []string{"manifest.json", "status/status.json", "lock/state.json", "objects/secret/web-creds.yaml", "objects/pod/" + pods[0].Name + ".yaml", "plan/restart.txt"} {
		if !names[want] {
			t.Errorf("bundle lacks %s (has %v)", want, names)
		}
	}

	after, err := bed.Client.CoordinationV1().Leases(ns).Get(t.Context(), lease.Items[0].Name, metav1.GetOptions{})
	if err != nil || after.ResourceVersion != rv {
		t.Errorf("the Lease changed under explain/report: resourceVersion %s -> %s (%v)", rv, after.ResourceVersion, err)
	}
	for _, p := range pods {
		now, err := bed.Client.CoreV1().Pods(ns).Get(t.Context(), p.Name, metav1.GetOptions{})
		if err != nil || now.UID != p.UID {
			t.Errorf("pod %s changed: %v", p.Name, err)
		}
	}
}
