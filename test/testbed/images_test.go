package testbed

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	pathpkg "path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestBuildImages builds the image tarball from stand-in binaries and reads it back with
// go-containerregistry: every reference is there, with its entrypoint, os/arch and files.
func TestBuildImages(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A stand-in busybox that lists three applets, as `busybox --list-full` does.
	busybox := write("busybox", "#!/bin/sh\nprintf 'bin/sh\\nusr/bin/wc\\nbin/busybox\\n'\n")
	src := imageSources{pauseBin: write("pause", "pause-bin"), busybox: busybox, etcd: write("etcd", "etcd-bin"), etcdctl: write("etcdctl", "etcdctl-bin"),
		crashShim: write("crash", "crash-bin"), cratePod: write("crate", "crate-bin")}
	cache := filepath.Join(dir, "cache")
	path, err := buildImages(t.Context(), cache, src)
	if err != nil {
		t.Fatal(err)
	}
	again, err := buildImages(t.Context(), cache, src)
	if err != nil || again != path {
		t.Errorf("second build = %s, %v; want the cached %s", again, err, path)
	}

	tests := []struct {
		ref        string
		entrypoint []string
		files      map[string]string // path -> content ("" = symlink or folder, only existence)
	}{
		{ImagePause, []string{"/pause"}, map[string]string{"pause": "pause-bin"}},
		{ImageShell, []string{"/bin/sh"}, map[string]string{"bin/sh": "", "usr/bin/wc": "", "tmp": ""}},
		{ImageEtcd, []string{"/usr/local/bin/etcd"}, map[string]string{"usr/local/bin/etcd": "etcd-bin", "usr/local/bin/etcdctl": "etcdctl-bin", "bin/sh": ""}},
		{ImageEtcdDistroless, []string{"/usr/local/bin/etcd"}, map[string]string{"usr/local/bin/etcd": "etcd-bin", "usr/local/bin/etcdctl": "etcdctl-bin", "tmp": ""}},
		{ImageReplicated, []string{"/app/bin/run"}, map[string]string{"app/bin/primary": ReplicatedAppScripts["primary"], "app/bin/sequence": ReplicatedAppScripts["sequence"]}},
	}
	for _, v := range CrateDBImageVersions {
		tests = append(tests, struct {
			ref        string
			entrypoint []string
			files      map[string]string
		}{ImageCrateDB(v), []string{"/docker-entrypoint.sh"}, map[string]string{"usr/local/bin/crash": "crash-bin",
			"usr/local/bin/crate": "crate-bin", "docker-entrypoint.sh": crateEntrypoint, "bin/sh": ""}})
	}
	if ImageCrateDB("9.9.9") != "" {
		t.Error("ImageCrateDB names a version the image is not tagged with")
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			tag, err := name.NewTag(tt.ref)
			if err != nil {
				t.Fatal(err)
			}
			img, err := tarball.ImageFromPath(path, &tag)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.OS != "linux" || cf.Architecture != "amd64" || !slices.Equal(cf.Config.Entrypoint, tt.entrypoint) {
				t.Errorf("config: os %s arch %s entrypoint %q", cf.OS, cf.Architecture, cf.Config.Entrypoint)
			}
			got := map[string]string{}
			tr := tar.NewReader(mutate.Extract(img))
			for {
				h, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(tr)
				got[h.Name] = string(b)
			}
			for f, want := range tt.files {
				v, ok := got[f]
				if !ok || (want != "" && v != want) {
					t.Errorf("file %s: present %v content %q, want %q", f, ok, v, want)
				}
			}
			if tt.ref == ImageEtcdDistroless {
				// The point of this image: no shell and no stty for etcdctl's password prompt.
				for f := range got {
					if base := pathpkg.Base(f); strings.HasPrefix(f, "bin") || base == "sh" || base == "stty" || base == "busybox" {
						t.Errorf("distroless image holds %s", f)
					}
				}
			}
		})
	}
}
