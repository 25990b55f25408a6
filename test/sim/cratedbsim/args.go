package cratedbsim

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// nodeSettings are the -C<key>=<value> settings a CrateDB node was started with.
type nodeSettings map[string]string

func (s nodeSettings) int(key string, def int) int {
	v, ok := s[key]
	if !ok {
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return def
	}
	return n
}

func (s nodeSettings) bool(key string, def bool) bool {
	v, ok := s[key]
	if !ok {
		return def
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "on", "yes", "1":
		return true
	case "false", "off", "no", "0":
		return false
	}
	return def
}

// Version is a CrateDB version "major.minor.patch".
type Version [3]int

// DefaultVersion is the version a node reports when neither Config.Version nor its image tag
// names one.
const DefaultVersion = "5.10.3"

func defaultVersion() Version {
	v, _ := ParseVersion(DefaultVersion)
	return v
}

// ParseVersion reads "5.10", "5.10.3" or "5.10.3-xyz".
func ParseVersion(s string) (Version, error) {
	core, _, _ := strings.Cut(strings.TrimPrefix(s, "v"), "-")
	parts := strings.Split(core, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, fmt.Errorf("version %q: want major.minor[.patch]", s)
	}
	var v Version
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return Version{}, fmt.Errorf("version %q: %q is not a number", s, p)
		}
		v[i] = n
	}
	return v, nil
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }

// AtLeast reports whether v >= major.minor.
func (v Version) AtLeast(major, minor int) bool {
	return v[0] > major || (v[0] == major && v[1] >= minor)
}

// imageVersion reads the version from an image reference such as "crate:5.10.3" or
// "docker.io/crate/crate:5.2"; ok false when the tag is not a version ("latest").
func imageVersion(image string) (Version, bool) {
	ref, _, _ := strings.Cut(image, "@")
	slash := strings.LastIndex(ref, "/")
	colon := strings.LastIndex(ref, ":")
	if colon <= slash {
		return Version{}, false
	}
	v, err := ParseVersion(ref[colon+1:])
	return v, err == nil
}

// crateContainer is the container running CrateDB: the one named "crate", else the first.
func crateContainer(spec *corev1.PodSpec) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == "crate" {
			return &spec.Containers[i]
		}
	}
	if len(spec.Containers) > 0 {
		return &spec.Containers[0]
	}
	return nil
}

// containerEnv resolves the variables Kubernetes defines for a container's command line: plain
// values and the downward-API fields of the pod. Values from Secrets and ConfigMaps are not
// resolved (their references then stay verbatim, as Kubernetes leaves undefined ones).
func containerEnv(c *corev1.Container, pod *corev1.Pod) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = expandKube(e.Value, env)
		case e.ValueFrom.FieldRef != nil && pod != nil:
			if v, ok := podField(pod, e.ValueFrom.FieldRef.FieldPath); ok {
				env[e.Name] = v
			}
		}
	}
	return env
}

var fieldSubscript = regexp.MustCompile(`^metadata\.(labels|annotations)\['([^']+)'\]$`)

func podField(pod *corev1.Pod, path string) (string, bool) {
	switch path {
	case "metadata.name":
		return pod.Name, true
	case "metadata.namespace":
		return pod.Namespace, true
	case "metadata.uid":
		return string(pod.UID), true
	case "spec.nodeName":
		return pod.Spec.NodeName, true
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, true
	case "status.podIP":
		return pod.Status.PodIP, true
	case "status.hostIP":
		return pod.Status.HostIP, true
	}
	if m := fieldSubscript.FindStringSubmatch(path); m != nil {
		if m[1] == "labels" {
			return pod.Labels[m[2]], true
		}
		return pod.Annotations[m[2]], true
	}
	return "", false
}

// expandKube expands $(VAR) references as Kubernetes does for command and args: defined
// variables are replaced, "$$" escapes a "$", and anything else stays verbatim.
func expandKube(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// The command substitutions the CrateDB operator puts into -Cnode.name, which the image's
// entrypoint shell evaluates (crate-operator crate/operator/create.py): the hostname (the pod
// name) and its last dash-separated field (the ordinal), written with awk by older operator
// versions and with rev and cut by current ones.
const (
	shellHostname           = "$(hostname)"
	shellHostnameOrdinal    = "$(hostname | awk -F- '{print $NF}')"
	shellHostnameOrdinalRev = "$(hostname | rev | cut -d- -f1 | rev)"
)

func expandShell(s, hostname string) string {
	ordinal := hostname[strings.LastIndex(hostname, "-")+1:]
	s = strings.ReplaceAll(s, shellHostnameOrdinal, ordinal)
	s = strings.ReplaceAll(s, shellHostnameOrdinalRev, ordinal)
	return strings.ReplaceAll(s, shellHostname, hostname)
}

// expandPlaceholders resolves CrateDB's ${VAR} setting placeholders from the container's
// environment (the official guide writes -Cnode.name=${POD_NAME}); unknown ones stay.
func expandPlaceholders(s string, env map[string]string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			b.WriteString(s)
			return b.String()
		}
		name := s[i+2 : i+end]
		b.WriteString(s[:i])
		if v, ok := env[name]; ok {
			b.WriteString(v)
		} else {
			b.WriteString(s[i : i+end+1])
		}
		s = s[i+end+1:]
	}
}

// podSettings reads the -C settings of a pod's CrateDB container after Kubernetes' variable
// expansion and the entrypoint's substitutions. A setting given twice keeps its first value
// here; settingsError says why CrateDB would not start with it.
func podSettings(pod *corev1.Pod, c *corev1.Container) nodeSettings {
	out, _ := podSettingsChecked(pod, c)
	return out
}

// podSettingsChecked is podSettings and the first reason CrateDB's command line refuses the
// settings before the node starts (server/cli/EnvironmentAwareCommand.java in crate/crate,
// org.elasticsearch.cli: "setting [k] must not be empty", "setting [k] already set, saw [a]
// and [b]" - every -C key at most once, whatever the values).
func podSettingsChecked(pod *corev1.Pod, c *corev1.Container) (nodeSettings, error) {
	out := nodeSettings{}
	if c == nil {
		return out, nil
	}
	var refusal error
	env := containerEnv(c, pod)
	hostname := ""
	if pod != nil {
		hostname = pod.Name
	}
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		a = expandPlaceholders(expandShell(expandKube(a, env), hostname), env)
		rest, ok := strings.CutPrefix(a, "-C")
		if !ok {
			continue
		}
		k, v, ok := strings.Cut(rest, "=")
		if !ok {
			continue
		}
		if prev, dup := out[k]; dup {
			if refusal == nil {
				refusal = fmt.Errorf("setting [%s] already set, saw [%s] and [%s]", k, prev, v)
			}
			continue
		}
		if v == "" && refusal == nil {
			refusal = fmt.Errorf("setting [%s] must not be empty", k)
		}
		out[k] = v
	}
	return out, refusal
}

// randomNodeName is the name a node without node.name gets: CrateDB generates a random one
// (docs/config/node.rst of CrateDB); here it derives from the pod's UID, so a new pod gets a
// new name.
func randomNodeName(podUID string) string {
	peaks := [...]string{"Mont Blanc", "Matterhorn", "Zugspitze", "Piz Bernina", "Grossglockner",
		"Dufourspitze", "Eiger", "Jungfrau", "Ortler", "Wildspitze", "Watzmann", "Dachstein"}
	sum := sha256.Sum256([]byte("name/" + podUID))
	n := binary.BigEndian.Uint32(sum[:4])
	return peaks[int(n)%len(peaks)] + " " + strconv.Itoa(int(n%1000))
}

// knownNodeSetting reports whether key is a node setting the given version accepts at start:
// CrateDB refuses to start with an unknown setting.
func knownNodeSetting(key string, v Version) bool {
	switch key {
	case "gateway.expected_data_nodes", "gateway.recover_after_data_nodes":
		// Added in 4.7 (crate-operator's GATEWAY_SETTINGS_DATA_NODES_VERSION).
		return v.AtLeast(4, 7)
	}
	return true
}
