package etcd

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Where a new member learns the initial cluster, read from the pod template. Only the
// ConfigMap layout can be driven safely: the tool writes the new member list there before the
// pod starts, and the member joins as the learner the tool added.
const (
	// LayoutConfigMap: ETCD_INITIAL_CLUSTER comes from a ConfigMap (envFrom, or an env
	// configMapKeyRef, possibly through an --initial-cluster=$(VAR) argument).
	LayoutConfigMap = "configmap"
	// LayoutEnv: ETCD_INITIAL_CLUSTER is a literal in the StatefulSet (the Bitnami chart,
	// whose entrypoint removes and re-adds its own member when it starts).
	LayoutEnv = "env"
	// LayoutArgs: a literal --initial-cluster argument.
	LayoutArgs = "args"
	// LayoutUnknown: nothing in the pod template sets the initial cluster.
	LayoutUnknown = "unknown"
)

// stateSource is the detected layout and, for LayoutConfigMap, where to write.
type stateSource struct {
	Layout     string
	ConfigMap  string
	ClusterKey string
	// StateKey is the ConfigMap key of ETCD_INITIAL_CLUSTER_STATE; empty when the pod
	// template fixes the state to "existing" itself.
	StateKey string
	// Why says where it was found, for plans and refusals.
	Why string
	// refusal, when set, is why this layout cannot be driven (even if a ConfigMap was found).
	refusal string
}

// detectStateSource reads the layout from the etcd container of sts. override names a
// ConfigMap given by option or annotation (its keys are the default ones).
func detectStateSource(sts *appsv1.StatefulSet, c *corev1.Container, override, overrideFrom string) stateSource {
	if override != "" {
		return stateSource{Layout: LayoutConfigMap, ConfigMap: override, ClusterKey: KeyInitialCluster,
			StateKey: KeyInitialClusterState, Why: "ConfigMap " + override + " (" + overrideFrom + ")"}
	}
	src := clusterSource(sts, c)
	if src.Layout != LayoutConfigMap {
		return src
	}
	// The state must come from the same ConfigMap, or be fixed to "existing". etcd takes a
	// flag over the variable it shadows, so --initial-cluster-state wins over the env; as
	// --initial-cluster=$(VAR), --initial-cluster-state=$(VAR) reads the variable VAR.
	state, stateWhy := envSource(c, KeyInitialClusterState)
	stateVar, stateArg := KeyInitialClusterState, ""
	if v, ok := argValue(c, "initial-cluster-state"); ok {
		stateArg = v
		if m := envRef.FindStringSubmatch(v); m != nil && strings.TrimSpace(v) == m[0] {
			stateVar = m[1]
			state, stateWhy = envSource(c, stateVar)
		} else {
			state = envVarSource{kind: "literal", value: v}
		}
	}
	switch {
	case state.kind == "configmap" && state.cm == src.ConfigMap:
		src.StateKey = state.key
	case state.kind == "configmap":
		src.refusal = fmt.Sprintf("%s comes from ConfigMap %s but %s from ConfigMap %s; keep both in one ConfigMap",
			KeyInitialCluster, src.ConfigMap, KeyInitialClusterState, state.cm)
	case state.kind == "literal" && state.value != "existing" && stateArg != "" && stateVar == KeyInitialClusterState:
		src.refusal = fmt.Sprintf("--initial-cluster-state=%s is fixed in the pod template, so a new member would start a new cluster instead of joining; take it from ConfigMap %s",
			state.value, src.ConfigMap)
	case state.kind == "literal" && state.value != "existing":
		src.refusal = fmt.Sprintf("%s is fixed to %q by %s, so a new member would start a new cluster instead of joining; take it from ConfigMap %s",
			KeyInitialClusterState, state.value, stateWhy, src.ConfigMap)
	case state.kind == "literal":
		src.StateKey = ""
	default:
		if key, ok := envFromKey(c, src.ConfigMap, stateVar); ok {
			src.StateKey = key
		} else if stateVar != KeyInitialClusterState {
			// A key written elsewhere would not reach the member, which would then
			// start with whatever $(VAR) resolves to.
			src.refusal = fmt.Sprintf("--initial-cluster-state=%s does not come from ConfigMap %s, so the tool cannot set it to \"existing\" for a new member; take %s from ConfigMap %s",
				stateArg, src.ConfigMap, stateVar, src.ConfigMap)
		} else {
			src.StateKey = KeyInitialClusterState
		}
	}
	return src
}

// clusterSource finds where ETCD_INITIAL_CLUSTER (or --initial-cluster) comes from.
func clusterSource(sts *appsv1.StatefulSet, c *corev1.Container) stateSource {
	if s, why := envSource(c, KeyInitialCluster); s.kind != "" {
		return s.stateSource(why)
	}
	if v, ok := argValue(c, "initial-cluster"); ok {
		if m := envRef.FindStringSubmatch(v); m != nil && strings.TrimSpace(v) == m[0] {
			if s, why := envSource(c, m[1]); s.kind != "" {
				return s.stateSource(why + " through --initial-cluster=" + v)
			}
		}
		return stateSource{Layout: LayoutArgs, Why: "the argument --initial-cluster=" + v}
	}
	// envFrom: the last ConfigMap that can define the variable wins, as in Kubernetes; one
	// named <sts>-cluster-state is preferred when several could.
	var found []string
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef != nil && strings.HasPrefix(KeyInitialCluster, ef.Prefix) {
			found = append(found, ef.ConfigMapRef.Name)
		}
	}
	if len(found) == 0 {
		return stateSource{Layout: LayoutUnknown}
	}
	name := found[len(found)-1]
	for _, n := range found {
		if n == sts.Name+ConfigMapSuffix {
			name = n
		}
	}
	key, _ := envFromKey(c, name, KeyInitialCluster)
	return stateSource{Layout: LayoutConfigMap, ConfigMap: name, ClusterKey: key, Why: "ConfigMap " + name + " (envFrom)"}
}

// envVarSource is where one environment variable of the container comes from.
type envVarSource struct {
	kind    string // "configmap", "literal" or "" (not set by env)
	cm, key string
	value   string
}

func (s envVarSource) stateSource(why string) stateSource {
	if s.kind == "configmap" {
		return stateSource{Layout: LayoutConfigMap, ConfigMap: s.cm, ClusterKey: s.key, Why: why}
	}
	return stateSource{Layout: LayoutEnv, Why: why}
}

// envSource looks name up in the container's env (not envFrom).
func envSource(c *corev1.Container, name string) (envVarSource, string) {
	for i := len(c.Env) - 1; i >= 0; i-- { // the last definition wins
		e := c.Env[i]
		if e.Name != name {
			continue
		}
		if e.ValueFrom == nil {
			return envVarSource{kind: "literal", value: e.Value}, "env " + name + " in the pod template"
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			return envVarSource{kind: "configmap", cm: r.Name, key: r.Key}, fmt.Sprintf("ConfigMap %s key %s (env %s)", r.Name, r.Key, name)
		}
		return envVarSource{kind: "other"}, "env " + name
	}
	return envVarSource{}, ""
}

// envFromKey is the key of ConfigMap cm that becomes variable name through envFrom.
func envFromKey(c *corev1.Container, cm, name string) (string, bool) {
	for i := len(c.EnvFrom) - 1; i >= 0; i-- {
		ef := c.EnvFrom[i]
		if ef.ConfigMapRef != nil && ef.ConfigMapRef.Name == cm && strings.HasPrefix(name, ef.Prefix) {
			return strings.TrimPrefix(name, ef.Prefix), true
		}
	}
	return "", false
}

// argValue reads --name=value or --name value from the container's command and args.
func argValue(c *corev1.Container, name string) (string, bool) {
	args := append(append([]string{}, c.Command...), c.Args...)
	for i, a := range args {
		// Shell-wrapped commands ("sh -c 'etcd --x=y ...'") hold flags inside one word.
		for _, w := range strings.Fields(a) {
			if v, ok := strings.CutPrefix(w, "--"+name+"="); ok {
				return strings.Trim(v, `'"`), true
			}
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// checkDrivable refuses, in one line and before any write, a membership change on a
// layout the tool cannot drive safely, saying what to change.
func (s stateSource) checkDrivable(ns, sts, doing string) error {
	who := fmt.Sprintf("etcd StatefulSet %s/%s", ns, sts)
	switch {
	case s.refusal != "":
		return ops.Preconditionf("cannot %s: %s: %s", doing, who, s.refusal)
	case s.Layout == LayoutConfigMap:
		return nil
	case s.Layout == LayoutEnv:
		return ops.Preconditionf("cannot %s: %s sets %s in its pod template (the Bitnami chart's layout, whose entrypoint removes and re-adds its own member at start, so a learner cannot be added safely); change the member count with the chart (helm upgrade --set replicaCount=N), or take %s from a ConfigMap (envFrom) to let kubectl-dbops drive it",
			doing, who, KeyInitialCluster, KeyInitialCluster)
	case s.Layout == LayoutArgs:
		return ops.Preconditionf("cannot %s: %s passes a fixed %s in its pod template, so a new member cannot join without a template change; set --initial-cluster=$(%s) and take %s and %s from a ConfigMap (envFrom), then run again",
			doing, who, strings.TrimPrefix(s.Why, "the argument "), KeyInitialCluster, KeyInitialCluster, KeyInitialClusterState)
	default:
		return ops.Preconditionf("cannot %s: the pod template of %s does not say where a new member learns the initial cluster (no %s env, envFrom ConfigMap or --initial-cluster argument); take it from a ConfigMap (envFrom), or name one with the annotation %s",
			doing, who, KeyInitialCluster, AnnotationConfigMap)
	}
}

// set writes initial (and the state "existing", where the ConfigMap holds it) into data.
func (s stateSource) set(data map[string]string, initial string) {
	data[s.ClusterKey] = initial
	if s.StateKey != "" {
		data[s.StateKey] = "existing"
	}
}

// holds reports whether data already says what set would write.
func (s stateSource) holds(data map[string]string, initial string) bool {
	return data[s.ClusterKey] == initial && (s.StateKey == "" || data[s.StateKey] == "existing")
}

// details are the plan's lines for a write of initial.
func (s stateSource) details(initial string) []string {
	out := []string{s.ClusterKey + "=" + initial}
	if s.StateKey != "" {
		out = append(out, s.StateKey+"=existing")
	}
	return out
}
