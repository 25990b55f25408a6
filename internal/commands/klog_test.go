package commands

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

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
