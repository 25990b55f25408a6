package cratedb

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Gateway arguments (docs/procedures.md, CrateDB): the expected node count and the
// recover-after quorum, as node counts before CrateDB 4.7 and as data node
// counts from 4.7 on.
const (
	argExpectedNodes         = "-Cgateway.expected_nodes="
	argExpectedDataNodes     = "-Cgateway.expected_data_nodes="
	argRecoverAfterNodes     = "-Cgateway.recover_after_nodes="
	argRecoverAfterDataNodes = "-Cgateway.recover_after_data_nodes="
)

var gatewayPrefixes = []string{argExpectedDataNodes, argExpectedNodes, argRecoverAfterDataNodes, argRecoverAfterNodes}

// quorum is the recover-after value for n nodes: a majority.
func quorum(n int) int { return n/2 + 1 }

// gatewayTarget is what a scale sets the gateway arguments to.
type gatewayTarget struct {
	Total, Data int
	// Version is the running version; when known it decides between the
	// node and the data node settings, whatever the spec used so far.
	Version version
}

// rewriteWord returns the gateway argument w should become ("" when w is
// not one).
func (t gatewayTarget) rewriteWord(w string) string {
	expected, recover := false, false
	data := false
	switch {
	case strings.HasPrefix(w, argExpectedDataNodes):
		expected, data = true, true
	case strings.HasPrefix(w, argExpectedNodes):
		expected = true
	case strings.HasPrefix(w, argRecoverAfterDataNodes):
		recover, data = true, true
	case strings.HasPrefix(w, argRecoverAfterNodes):
		recover = true
	default:
		return ""
	}
	if t.Version.known() {
		data = t.Version.atLeast(dataNodeSettingsFrom.major, dataNodeSettingsFrom.minor)
	}
	n := t.Total
	if data {
		n = t.Data
	}
	switch {
	case expected && data:
		return argExpectedDataNodes + strconv.Itoa(n)
	case expected:
		return argExpectedNodes + strconv.Itoa(n)
	case recover && data:
		return argRecoverAfterDataNodes + strconv.Itoa(quorum(n))
	default:
		return argRecoverAfterNodes + strconv.Itoa(quorum(n))
	}
}

// updateStatefulSet applies mutate to a fresh copy and updates it,
// retrying on conflicts; mutate reports whether it changed anything, so an
// already-applied change writes nothing.
func updateStatefulSet(ctx context.Context, client kubernetes.Interface, ns, name string,
	mutate func(*appsv1.StatefulSet) bool) (changed bool, err error) {
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts, err := client.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if changed = mutate(sts); !changed {
			return nil
		}
		_, err = client.AppsV1().StatefulSets(ns).Update(ctx, sts, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("updating StatefulSet %s/%s: %w", ns, name, err)
	}
	return changed, nil
}

// setReplicas changes only spec.replicas (one patch of that field); changed is false when
// it already had that value.
func setReplicas(ctx context.Context, client kubernetes.Interface, ns string, g *ops.NodeGroup, n int32) (changed bool, err error) {
	if cur := ops.StatefulSetOf(g); cur != nil && cur.Spec.Replicas != nil && *cur.Spec.Replicas == n {
		return false, nil
	}
	if _, err := kube.SetReplicas(ctx, client, ns, ops.StatefulSetName(g), n); err != nil {
		return false, err
	}
	return true, nil
}

// crateContainerOf returns the container running CrateDB: "crate", else
// the only container.
func crateContainerOf(spec *corev1.PodSpec) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == crateContainer {
			return &spec.Containers[i]
		}
	}
	if len(spec.Containers) == 1 {
		return &spec.Containers[0]
	}
	return nil
}

// gatewayArgs lists the gateway arguments of the crate container (args
// and command, also inside a shell command line), as written.
func gatewayArgs(s *appsv1.StatefulSet) []string {
	c := crateContainerOf(&s.Spec.Template.Spec)
	if c == nil {
		return nil
	}
	var out []string
	for _, list := range [][]string{c.Command, c.Args} {
		for _, a := range list {
			for _, w := range strings.Split(a, " ") {
				for _, p := range gatewayPrefixes {
					if strings.HasPrefix(w, p) {
						out = append(out, w)
					}
				}
			}
		}
	}
	return out
}

// setGatewayArgs rewrites every gateway argument (in args and command, also
// inside a shell command line) to t; it reports a change. Each setting is
// left once: from 4.7 both expected_nodes and expected_data_nodes become
// expected_data_nodes, and CrateDB refuses to start when a -C setting is
// given twice ("setting [...] already set", whatever the values).
func setGatewayArgs(s *appsv1.StatefulSet, t gatewayTarget) bool {
	c := crateContainerOf(&s.Spec.Template.Spec)
	if c == nil {
		return false
	}
	changed := false
	seen := map[string]bool{}
	// The container runs command then args: the first occurrence stays.
	rewrite := func(list []string) []string {
		out := list[:0]
		for _, a := range list {
			n := rewriteGateway(a, t, seen)
			if n != a {
				changed = true
			}
			if n == "" && a != "" {
				continue // the argument was only a repeated setting
			}
			out = append(out, n)
		}
		return out
	}
	if len(c.Command) > 0 {
		c.Command = rewrite(c.Command)
	}
	if len(c.Args) > 0 {
		c.Args = rewrite(c.Args)
	}
	return changed
}

// gatewayKey is the setting name of a gateway argument word.
func gatewayKey(w string) string {
	k, _, _ := strings.Cut(strings.TrimPrefix(w, "-C"), "=")
	return k
}

// rewriteGateway replaces each gateway argument in a (possibly
// multi-word) argument and drops a gateway setting already in seen (nil:
// none is dropped); it records the settings it keeps in seen.
func rewriteGateway(a string, t gatewayTarget, seen map[string]bool) string {
	words := strings.Split(a, " ")
	out := words[:0]
	for _, w := range words {
		if n := t.rewriteWord(w); n != "" {
			if seen != nil {
				k := gatewayKey(n)
				if seen[k] {
					continue
				}
				seen[k] = true
			}
			w = n
		}
		out = append(out, w)
	}
	return strings.Join(out, " ")
}
