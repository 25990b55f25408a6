package commands

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"
)

// TestKlogQuietUnlessVerbose: client-go logs through klog (port-forward
// failures, retries). Without -v nothing reaches stderr, not even errors;
// with -v N they go to the command's stderr.
func TestKlogQuietUnlessVerbose(t *testing.T) {
	// klog writes some severities straight to os.Stderr: catch those too.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	t.Cleanup(func() { os.Stderr = saved })

	var quiet, verbose bytes.Buffer
	if err := setupKlog(0, &quiet); err != nil {
		t.Fatal(err)
	}
	klog.Errorf("E-marker-quiet")
	klog.Warningf("W-marker-quiet")
	klog.V(6).Infof("I-marker-quiet")
	klog.Flush()

	if err := setupKlog(6, &verbose); err != nil {
		t.Fatal(err)
	}
	klog.Errorf("E-marker-verbose")
	klog.V(6).Infof("I-marker-verbose")
	klog.V(7).Infof("I-marker-too-verbose")
	klog.Flush()
	_ = setupKlog(0, io.Discard)

	os.Stderr = saved
	_ = w.Close()
	raw, _ := io.ReadAll(r)
	if len(raw) > 0 {
		t.Errorf("klog wrote to the process's stderr: %q", raw)
	}
	if quiet.Len() > 0 {
		t.Errorf("klog wrote without -v: %q", quiet.String())
	}
	for _, want := range []string{"E-marker-verbose", "I-marker-verbose"} {
		if !strings.Contains(verbose.String(), want) {
			t.Errorf("-v 6 output lacks %s: %q", want, verbose.String())
		}
	}
	if strings.Contains(verbose.String(), "too-verbose") {
		t.Errorf("-v 6 shows level 7: %q", verbose.String())
	}
}

// klogLine matches a line in klog's header format (severity, date, time, pid, file:line).
var klogLine = regexp.MustCompile(`(?m)^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^ ]+:\d+\] `)

// TestVerbosityShowsAPIRequests runs a real command (status) through the command layer and
// its production clients against an HTTP server standing in for the API server: with -v 6
// and with --v=6, as kubectl takes them, client-go logs each API request on stderr; without
// -v no klog line reaches stderr (the command fails, the server knows no cluster, and
// client-go would log that at some levels).
func TestVerbosityShowsAPIRequests(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "config")
	writeKubeconfig := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context: {cluster: c, user: u, namespace: prod}\ncurrent-context: x\n", srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(writeKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = setupKlog(0, io.Discard) })

	tests := []struct {
		name     string
		flags    []string
		env      map[string]string
		requests bool
	}{
		{"no -v", nil, nil, false},
		{"-v 6", []string{"-v", "6"}, nil, true},
		{"--v=6", []string{"--v=6"}, nil, true},
		{"-v 5", []string{"-v", "5"}, nil, false},
		// As every flag, -v can come from the environment (or the config file).
		{"DBOPS_V=6", nil, map[string]string{"DBOPS_V": "6"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			paths = nil
			mu.Unlock()
			// klog writes some severities straight to os.Stderr: catch those too.
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			saved := os.Stderr
			os.Stderr = w
			var out, errOut bytes.Buffer
			cmd := NewRootCmd(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
				func(g *GlobalOptions) { g.Getenv = func(k string) string { return tt.env[k] } })
			cmd.SetArgs(append([]string{"status", "db", "--kubeconfig", kubeconfig, "--request-timeout", "10s"}, tt.flags...))
			runErr := cmd.ExecuteContext(t.Context())
			klog.Flush()
			os.Stderr = saved
			_ = w.Close()
			raw, _ := io.ReadAll(r)
			if len(raw) > 0 {
				t.Errorf("klog wrote to the process's stderr: %q", raw)
			}
			mu.Lock()
			seen := slices.Clone(paths)
			mu.Unlock()
			if runErr == nil || len(seen) == 0 {
				t.Fatalf("status against an API server with no cluster: err %v after requests %v; want a failure after some requests", runErr, seen)
			}
			stderr := errOut.String()
			for _, p := range seen {
				line := regexp.MustCompile(`(?m)^.*url="` + regexp.QuoteMeta(srv.URL+p) + `[?"].*$`).FindString(stderr)
				switch {
				case tt.requests && (line == "" || !klogLine.MatchString(line) || !strings.Contains(line, `verb="GET"`)):
					t.Errorf("%s: stderr has no klog line for the request to %s:\n%s", tt.name, p, stderr)
				case !tt.requests && line != "":
					t.Errorf("%s: stderr logs the request to %s: %q", tt.name, p, line)
				}
			}
			if !tt.requests && klogLine.MatchString(stderr) {
				t.Errorf("%s: stderr has klog lines:\n%s", tt.name, stderr)
			}
		})
	}
}
