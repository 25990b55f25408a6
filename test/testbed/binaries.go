package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Versions of the components. They must match hack/testbed/build.sh, which builds them into
// the folder named by CacheKey.
const (
	KubernetesVersion = "v1.36.3"
	EtcdVersion       = "v3.6.8"
	KwokVersion       = "v0.8.0"
)

// CacheKey names the cache sub-folder for this set of component versions.
const CacheKey = "k8s-" + KubernetesVersion + "_etcd-" + EtcdVersion + "_kwok-" + KwokVersion

// Environment variables understood by the testbed.
const (
	// EnvBinDir points at a folder with all component binaries, bypassing the cache.
	EnvBinDir = "DBOPS_TESTBED_BIN"
	// EnvCacheDir overrides the cache root (default $XDG_CACHE_HOME/kubectl-dbops/testbed).
	EnvCacheDir = "DBOPS_TESTBED_CACHE"
)

// kubectl is not a component: the e2e tests run the plugin through it (Testbed.Kubectl).
var requiredBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok"}

// DefaultBinDir is where hack/testbed/build.sh puts the binaries, honouring the same
// environment variables.
func DefaultBinDir() (string, error) {
	if dir := os.Getenv(EnvBinDir); dir != "" {
		return dir, nil
	}
	root := os.Getenv(EnvCacheDir)
	if root == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("locate cache dir: %w", err)
			}
			cache = filepath.Join(home, ".cache")
		}
		root = filepath.Join(cache, "kubectl-dbops", "testbed")
	}
	return filepath.Join(root, CacheKey, "bin"), nil
}

func missingBinaries(dir string, required []string) []string {
	var missing []string
	for _, b := range required {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	return missing
}

// buildScript finds hack/testbed/build.sh relative to this source file, which exists whenever
// the code runs from a checkout (tests, go run).
func buildScript() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate source directory")
	}
	script := filepath.Join(filepath.Dir(file), "..", "..", "hack", "testbed", "build.sh")
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("build script not found: %w", err)
	}
	return filepath.Clean(script), nil
}

// ensureBinaries returns the bin dir, building the binaries with build.sh when they are
// missing and building is allowed.
func ensureBinaries(ctx context.Context, opts Options) (string, error) {
	dir := opts.BinDir
	if dir == "" {
		var err error
		if dir, err = DefaultBinDir(); err != nil {
			return "", err
		}
	}
	required := requiredBinaries
	if opts.RealNodes != 0 {
		required = append(append([]string(nil), requiredBinaries...), realNodeBinaries...)
	}
	missing := missingBinaries(dir, required)
	if len(missing) == 0 {
		return dir, nil
	}
	script, scriptErr := buildScript()
	howTo := "run hack/testbed/build.sh from the repository root (takes several minutes once)"
	if opts.NoBuild || opts.BinDir != "" || os.Getenv(EnvBinDir) != "" || scriptErr != nil {
		return "", fmt.Errorf("testbed binaries %s missing in %s: %s", strings.Join(missing, ", "), dir, howTo)
	}
	opts.logf("testbed: binaries %s missing, running %s (several minutes, once)", strings.Join(missing, ", "), script)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, script)
	cmd.Stdout = &out
	cmd.Stderr = io.MultiWriter(&out, opts.buildLog())
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build testbed binaries with %s: %w\n%s", script, err, lastLines(out.String(), 30))
	}
	if missing := missingBinaries(dir, required); len(missing) != 0 {
		return "", fmt.Errorf("build.sh finished but %s still missing in %s", strings.Join(missing, ", "), dir)
	}
	return dir, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
