package commands

import (
	"archive/zip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

const knownSecret = "s3cr3t-VALUE-5e1f"

// secretCluster is the generic web cluster whose pods use a Secret and a ConfigMap every
// way a pod can (env, envFrom, volumes), plus a literal credential env value and a
// last-applied annotation holding the Secret's data.
func secretCluster() []runtime.Object {
	objs := fakecluster.Objects("prod", "db", "", webObjects()...)
	use := func(spec *corev1.PodSpec) {
		spec.Volumes = append(spec.Volumes,
			corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-creds"}}},
			corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db-conf"}}}})
		if len(spec.Containers) == 0 {
			spec.Containers = []corev1.Container{{Name: "db", Image: "example/db:1"}}
		}
		c := &spec.Containers[0]
		c.Env = append(c.Env,
			corev1.EnvVar{Name: "DB_PASSWORD", Value: knownSecret},
			corev1.EnvVar{Name: "HEAP", Value: "2g"},
			corev1.EnvVar{Name: "ADMIN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "db-creds"}, Key: "password"}}})
		c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db-creds"}}})
	}
	for _, o := range objs {
		switch x := o.(type) {
		case *corev1.Pod:
			use(&x.Spec)
		case *appsv1.StatefulSet:
			use(&x.Spec.Template.Spec)
			x.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = `{"password":"` + knownSecret + `"}`
		}
	}
	return append(objs,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-creds", Namespace: "prod",
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"password":"` + knownSecret + `"}}`}},
			Data: map[string][]byte{"password": []byte(knownSecret)}, StringData: map[string]string{"token": knownSecret}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "db-conf", Namespace: "prod"}, Data: map[string]string{"db.conf": "auth=" + knownSecret}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "ev1", Namespace: "prod"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "db-web-0"},
			Reason: "Killing", Message: "Stopping container db", Type: "Normal"})
}

// unzip returns the bundle's files.
func unzip(t *testing.T, path string) map[string]string {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	out := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[f.Name] = string(b)
	}
	return out
}

// TestReportRedactsSecrets: the bundle holds the sections and a manifest, the Secret and
// ConfigMap as keys only, and the known secret value nowhere (every file grepped, logs too);
// nothing is written to the cluster.
func TestReportRedactsSecrets(t *testing.T) {
	h := newHarness(t, secretCluster()...)
	path := filepath.Join(t.TempDir(), "bundle.zip")
	r := h.run("report", "db", "-f", path, "--logs")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.err, r.out)
	}
	if w := fakecluster.Writes(h.client); len(w) > 0 {
		t.Errorf("report wrote: %v", w)
	}
	files := unzip(t, path)
	for name, body := range files {
		if strings.Contains(body, knownSecret) {
			t.Errorf("%s holds the secret value", name)
		}
	}
	for _, want := range []string{"manifest.json", "status/status.txt", "status/status.json", "status/status.yaml", "plan/restart.txt",
		"plan/restart.json", "lock/state.json", "lock/deny-list.json", "history.json", "events.yaml", "objects/secret/db-creds.yaml",
		"objects/configmap/db-conf.yaml", "objects/statefulset/db-web.yaml", "objects/pod/db-web-0.yaml", "logs/db-web-0/db.log"} {
		if _, ok := files[want]; !ok {
			t.Errorf("bundle lacks %s; has %v", want, keys(files))
		}
	}
	if s := files["objects/secret/db-creds.yaml"]; !strings.Contains(s, "- password") || !strings.Contains(s, "- token") {
		t.Errorf("secret keys missing:\n%s", s)
	}
	if s := files["objects/pod/db-web-0.yaml"]; !strings.Contains(s, "<redacted>") || !strings.Contains(s, "2g") || strings.Contains(s, "managedFields") {
		t.Errorf("pod not redacted as documented:\n%s", s)
	}
	if !strings.Contains(files["events.yaml"], "Stopping container db") {
		t.Errorf("events: %s", files["events.yaml"])
	}
	var m Manifest
	if err := json.Unmarshal([]byte(files["manifest.json"]), &m); err != nil {
		t.Fatal(err)
	}
	if m.Cluster != "db" || len(m.Included) == 0 || len(m.Redacted) == 0 {
		t.Errorf("manifest = %+v", m)
	}
	if _, ok := m.Omitted["diagnostics/"]; !ok {
		t.Errorf("manifest does not say the generic engine has no diagnostics: %+v", m.Omitted)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestReportRefusesOverwrite: an existing file is kept (exit 2, untouched) unless --force;
// no temporary file is left behind.
func TestReportRefusesOverwrite(t *testing.T) {
	h := newHarness(t, fakecluster.Objects("prod", "db", "", webObjects()...)...)
	dir := t.TempDir()
	path := filepath.Join(dir, "bundle.zip")
	if err := os.WriteFile(path, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := h.run("report", "db", "-f", path)
	if r.code != ops.ExitUsage || !strings.Contains(r.err, "--force") {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if b, _ := os.ReadFile(path); string(b) != "keep me" {
		t.Fatalf("file overwritten: %q", b)
	}
	if r := h.run("report", "db", "-f", path, "--force"); r.code != 0 {
		t.Fatalf("--force: exit %d: %s", r.code, r.err)
	}
	if _, ok := unzip(t, path)["manifest.json"]; !ok {
		t.Error("no manifest after --force")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
	if r := h.run("report", "db"); r.code != ops.ExitUsage || !strings.Contains(r.err, "-f FILE") {
		t.Errorf("no -f: exit %d: %s", r.code, r.err)
	}
}

// TestReportLogsPermission: `get pods/log` is asked only with --logs; without it the bundle
// leaves out logs/ naming the permission once, warns, and asks the API server for no log.
func TestReportLogsPermission(t *testing.T) {
	logReads := func(h *harness) int {
		n := 0
		for _, a := range h.client.Actions() {
			if a.GetVerb() == "get" && a.GetSubresource() == "log" {
				n++
			}
		}
		return n
	}
	t.Run("not asked without --logs", func(t *testing.T) {
		h := newHarness(t, secretCluster()...)
		if r := h.run("report", "db", "-f", filepath.Join(t.TempDir(), "b.zip")); r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		if slices.Contains(h.reviewed, "get pods/log") || logReads(h) != 0 {
			t.Errorf("without --logs: reviewed %v, %d log reads", h.reviewed, logReads(h))
		}
	})
	t.Run("asked with --logs", func(t *testing.T) {
		h := newHarness(t, secretCluster()...)
		if r := h.run("report", "db", "-f", filepath.Join(t.TempDir(), "b.zip"), "--logs"); r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		if !slices.Contains(h.reviewed, "get pods/log") || logReads(h) == 0 {
			t.Errorf("with --logs: reviewed %v, %d log reads", h.reviewed, logReads(h))
		}
	})
	t.Run("denied", func(t *testing.T) {
		h := newHarness(t, secretCluster()...)
		h.denied["get pods/log"] = true
		path := filepath.Join(t.TempDir(), "b.zip")
		r := h.run("report", "db", "-f", path, "--logs")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		if n := logReads(h); n != 0 {
			t.Errorf("%d log reads without the permission", n)
		}
		if strings.Count(r.err, "get pods/log") != 1 || !strings.Contains(r.err, "warning: logs left out") {
			t.Errorf("stderr = %q, want one warning naming get pods/log", r.err)
		}
		files := unzip(t, path)
		var m Manifest
		if err := json.Unmarshal([]byte(files["manifest.json"]), &m); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(m.Omitted["logs/"], "you may not get pods/log") {
			t.Errorf("manifest omitted = %v, want logs/ naming get pods/log", m.Omitted)
		}
		for name := range files {
			if strings.HasPrefix(name, "logs/") {
				t.Errorf("bundle holds %s", name)
			}
		}
	})
}
