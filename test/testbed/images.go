package testbed

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Images imported into every real node's containerd. Pods that use them must set
// imagePullPolicy: Never: there is no registry.
const (
	// ImagePause is the pod sandbox image (test/testbed/cmd/pause).
	ImagePause = "example.local/pause:dev"
	// ImageShell is a busybox image: /bin/sh and the busybox applets.
	ImageShell = "example.local/busybox:dev"
	// ImageEtcd adds etcd and etcdctl (the test bed's own build) to ImageShell.
	ImageEtcd = "example.local/etcd:" + EtcdVersion
	// ImageEtcdDistroless is etcd and etcdctl on a base with no shell and no stty, like the
	// official image (gcr.io/etcd-development/etcd, registry.k8s.io/etcd: distroless): only
	// /etc/passwd, /etc/group and /tmp besides the programs.
	ImageEtcdDistroless = "example.local/etcd-distroless:" + EtcdVersion
	// ImageReplicated is the replicated-app example: ImageShell plus the shell scripts of
	// replicatedScripts in /app/bin (see ReplicatedAppScripts).
	ImageReplicated = "example.local/replicated-app:dev"
)

// imageCrateDBRepo is the repository of the CrateDB SIMULATOR image: ImageShell plus the
// crash shim as /usr/local/bin/crash (test/cmd/crash-shim), the pod proxy as /usr/local/bin/crate
// (test/cmd/cratedb-sim-pod: the pod's HTTP, PostgreSQL and exporter ports reach the pod's node in
// the host's simulator, test/sim/cratedbsim) and /docker-entrypoint.sh, started as the
// CrateDB image is (`crate -C...`, or through the entrypoint as the CrateDB operator does).
// It is tagged with every version of CrateDBImageVersions, since the simulator reads a
// node's version from its image tag.
const imageCrateDBRepo = "example.local/crate"

// CrateDBImageVersions are the tags of the CrateDB simulator image: a version before 5.3
// (licenses) and a current one.
var CrateDBImageVersions = []string{"5.2.11", "5.10.3"}

// ImageCrateDB is the CrateDB simulator image reference for version, "" when the image has no
// such tag.
func ImageCrateDB(version string) string {
	for _, v := range CrateDBImageVersions {
		if v == version {
			return imageCrateDBRepo + ":" + v
		}
	}
	return ""
}

// crateEntrypoint is the simulator image's /docker-entrypoint.sh: like the CrateDB image's,
// arguments that start with an option are CrateDB's.
const crateEntrypoint = `#!/bin/sh
case "$1" in -*) set -- crate "$@" ;; esac
exec "$@"
`

// imagePath is the PATH of every image (busybox puts applets in /bin, /sbin, /usr/bin, /usr/sbin).
const imagePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/app/bin"

// busyboxPath is where Debian's busybox-static package installs the static binary.
const busyboxPath = "/bin/busybox"

// imageFile is one file of a layer.
type imageFile struct {
	path string // absolute path in the image
	mode int64
	data []byte // regular file content
	link string // symlink target (data unused)
	dir  bool
}

// ReplicatedAppScripts are the commands of the replicated-app example image, installed as
// /app/bin/<name>. The application keeps its state in $DATA (default /data, a volume):
//   - seq: the sequence number printed by `sequence` (0 when missing);
//   - role: what the node runs as: idle (after a container start), primary, secondary, stopped;
//   - hang-<cmd>: when present, <cmd> first sleeps that many seconds (a hung promotion or
//     demotion that would still complete later), then does its work;
//   - fail-<cmd>: when present, <cmd> exits 3 without doing anything.
//
// `run` is the container's main process: it resets role to idle (a fresh process serves no
// role until told) and sleeps until SIGTERM.
var ReplicatedAppScripts = map[string]string{
	"run": `#!/bin/sh
D="${DATA:-/data}"
mkdir -p "$D"
echo idle > "$D/role"
trap 'exit 0' TERM INT
while :; do sleep 1 & wait $!; done
`,
	"sequence": `#!/bin/sh
D="${DATA:-/data}"
cat "$D/seq" 2>/dev/null || echo 0
`,
	"status": `#!/bin/sh
D="${DATA:-/data}"
cat "$D/role" 2>/dev/null || echo idle
`,
	"seed":      roleScript("primary"),
	"primary":   roleScript("primary"),
	"secondary": roleScript("secondary"),
	"stop":      roleScript("stopped"),
}

// roleScript is a command that switches the node to role, honouring hang-<cmd> and fail-<cmd>.
func roleScript(role string) string {
	return `#!/bin/sh
D="${DATA:-/data}"
cmd=$(basename "$0")
if [ -f "$D/fail-$cmd" ]; then echo "$cmd refused" >&2; exit 3; fi
if [ -f "$D/hang-$cmd" ]; then sleep "$(cat "$D/hang-$cmd")"; fi
echo ` + role + ` > "$D/role.tmp" && mv "$D/role.tmp" "$D/role"
echo "$cmd done: ` + role + `${1:+ (primaries: $*)}"
`
}

// imageSources are the host files the images are made of.
type imageSources struct {
	pauseBin, busybox, etcd, etcdctl string
	// crashShim and cratePod are the static builds of test/cmd/crash-shim and test/cmd/cratedb-sim-pod.
	crashShim, cratePod string
}

// buildImages writes one docker-archive tarball holding every test bed image into dir (cached
// by content: a tarball of the same inputs is reused) and returns its path.
func buildImages(ctx context.Context, cacheDir string, src imageSources) (string, error) {
	files := map[string]string{"pause": src.pauseBin, "busybox": src.busybox, "etcd": src.etcd, "etcdctl": src.etcdctl,
		"crash": src.crashShim, "crate": src.cratePod}
	contents := map[string][]byte{}
	h := sha256.New()
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		data, err := os.ReadFile(files[k])
		if err != nil {
			return "", fmt.Errorf("image input %s: %w", k, err)
		}
		contents[k] = data
		fmt.Fprintf(h, "%s %d\n", k, len(data))
		h.Write(data)
	}
	scripts := make([]string, 0, len(ReplicatedAppScripts))
	for k := range ReplicatedAppScripts {
		scripts = append(scripts, k)
	}
	sort.Strings(scripts)
	for _, k := range scripts {
		fmt.Fprintf(h, "script %s\n%s", k, ReplicatedAppScripts[k])
	}
	fmt.Fprintf(h, "refs %s %s %s %s %s %s %s %v\n%s", ImagePause, ImageShell, ImageEtcd, ImageEtcdDistroless, ImageReplicated, imagePath,
		imageCrateDBRepo, CrateDBImageVersions, crateEntrypoint)
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	out := filepath.Join(cacheDir, "images-"+sum+".tar")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}

	appletDirs, applets, err := busyboxApplets(ctx, src.busybox)
	if err != nil {
		return "", err
	}
	shellFiles := []imageFile{
		{path: "/bin", dir: true, mode: 0o755},
		{path: "/tmp", dir: true, mode: 0o1777},
		{path: "/data", dir: true, mode: 0o755},
		{path: "/etc", dir: true, mode: 0o755},
		{path: "/etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")},
		{path: "/etc/group", mode: 0o644, data: []byte("root:x:0:\nnogroup:x:65534:\n")},
		{path: busyboxPath, mode: 0o755, data: contents["busybox"]},
	}
	for _, d := range appletDirs {
		shellFiles = append(shellFiles, imageFile{path: d, dir: true, mode: 0o755})
	}
	for _, a := range applets {
		if a == busyboxPath {
			continue
		}
		shellFiles = append(shellFiles, imageFile{path: a, link: busyboxPath})
	}
	shellLayer, err := layerOf(shellFiles)
	if err != nil {
		return "", fmt.Errorf("busybox layer: %w", err)
	}
	pauseLayer, err := layerOf([]imageFile{{path: "/pause", mode: 0o755, data: contents["pause"]}})
	if err != nil {
		return "", fmt.Errorf("pause layer: %w", err)
	}
	etcdLayer, err := layerOf(localBinFiles(nil, map[string][]byte{"etcd": contents["etcd"], "etcdctl": contents["etcdctl"]}, "etcd", 0o700))
	if err != nil {
		return "", fmt.Errorf("etcd layer: %w", err)
	}
	distrolessLayer, err := layerOf([]imageFile{
		{path: "/tmp", dir: true, mode: 0o1777},
		{path: "/etc", dir: true, mode: 0o755},
		{path: "/etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{path: "/etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
	})
	if err != nil {
		return "", fmt.Errorf("distroless base layer: %w", err)
	}
	appFiles := []imageFile{{path: "/app", dir: true, mode: 0o755}, {path: "/app/bin", dir: true, mode: 0o755}}
	for _, k := range scripts {
		appFiles = append(appFiles, imageFile{path: "/app/bin/" + k, mode: 0o755, data: []byte(ReplicatedAppScripts[k])})
	}
	appLayer, err := layerOf(appFiles)
	if err != nil {
		return "", fmt.Errorf("replicated-app layer: %w", err)
	}

	crateLayer, err := layerOf(localBinFiles(
		[]imageFile{{path: "/docker-entrypoint.sh", mode: 0o755, data: []byte(crateEntrypoint)}},
		map[string][]byte{"crash": contents["crash"], "crate": contents["crate"]}, "crate", 0o755))
	if err != nil {
		return "", fmt.Errorf("crate layer: %w", err)
	}

	images := map[string]struct {
		layers     []v1.Layer
		entrypoint []string
	}{
		ImagePause:          {[]v1.Layer{pauseLayer}, []string{"/pause"}},
		ImageShell:          {[]v1.Layer{shellLayer}, []string{"/bin/sh"}},
		ImageEtcd:           {[]v1.Layer{shellLayer, etcdLayer}, []string{"/usr/local/bin/etcd"}},
		ImageEtcdDistroless: {[]v1.Layer{distrolessLayer, etcdLayer}, []string{"/usr/local/bin/etcd"}},
		ImageReplicated:     {[]v1.Layer{shellLayer, appLayer}, []string{"/app/bin/run"}},
	}
	for _, v := range CrateDBImageVersions {
		images[ImageCrateDB(v)] = struct {
			layers     []v1.Layer
			entrypoint []string
		}{[]v1.Layer{shellLayer, crateLayer}, []string{"/docker-entrypoint.sh"}}
	}
	refs := map[name.Reference]v1.Image{}
	for ref, spec := range images {
		img, err := mutate.AppendLayers(empty.Image, spec.layers...)
		if err != nil {
			return "", fmt.Errorf("image %s: %w", ref, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return "", fmt.Errorf("image %s config: %w", ref, err)
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = "linux", "amd64"
		cf.Config.Entrypoint = spec.entrypoint
		cf.Config.Env = []string{imagePath}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return "", fmt.Errorf("image %s config: %w", ref, err)
		}
		tag, err := name.NewTag(ref)
		if err != nil {
			return "", fmt.Errorf("image reference %s: %w", ref, err)
		}
		refs[tag] = img
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("create image cache: %w", err)
	}
	tmp, err := os.CreateTemp(cacheDir, "images-*.tmp")
	if err != nil {
		return "", fmt.Errorf("create image tarball: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tarball.MultiRefWrite(refs, tmp); err != nil {
		_ = tmp.Close()
		return "", fmt.Errorf("write image tarball: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write image tarball: %w", err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", fmt.Errorf("write image tarball: %w", err)
	}
	return out, nil
}

// localBinFiles are the files of a layer that adds programs: first, then the programs in
// /usr/local/bin (sorted by name) and the folder /var/lib/<varLib> with mode varLibMode.
func localBinFiles(first []imageFile, bins map[string][]byte, varLib string, varLibMode int64) []imageFile {
	files := append(append([]imageFile{}, first...),
		imageFile{path: "/usr", dir: true, mode: 0o755},
		imageFile{path: "/usr/local", dir: true, mode: 0o755},
		imageFile{path: "/usr/local/bin", dir: true, mode: 0o755})
	names := make([]string, 0, len(bins))
	for n := range bins {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		files = append(files, imageFile{path: "/usr/local/bin/" + n, mode: 0o755, data: bins[n]})
	}
	return append(files,
		imageFile{path: "/var", dir: true, mode: 0o755},
		imageFile{path: "/var/lib", dir: true, mode: 0o755},
		imageFile{path: "/var/lib/" + varLib, dir: true, mode: varLibMode})
}

// busyboxApplets lists the absolute paths of busybox's applets, as `busybox --list-full` prints
// them (e.g. bin/sh, usr/bin/wc), so that the image has one symlink per applet, and the folders
// they need besides /bin, parents first.
func busyboxApplets(ctx context.Context, busybox string) (dirs, applets []string, err error) {
	out, err := exec.CommandContext(ctx, busybox, "--list-full").Output()
	if err != nil {
		return nil, nil, fmt.Errorf("list busybox applets: %w", err)
	}
	seen := map[string]bool{"/": true, "/bin": true}
	for _, l := range strings.Fields(string(out)) {
		p := "/" + strings.TrimPrefix(l, "/")
		applets = append(applets, p)
		for d := filepath.Dir(p); !seen[d]; d = filepath.Dir(d) {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	// Sorting puts /usr before /usr/bin.
	sort.Strings(dirs)
	return dirs, applets, nil
}

// layerOf builds an uncompressed tar of files in memory and wraps it as a layer.
func layerOf(files []imageFile) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{Name: strings.TrimPrefix(f.path, "/"), Mode: f.mode}
		switch {
		case f.dir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		case f.link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.link, 0o777
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed))
}
