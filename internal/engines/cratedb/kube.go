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
)

// Expected-nodes arguments: before CrateDB 4.7, and from 4.7 on.
const (
	argExpectedNodes     = "-Cgateway.expected_nodes="
	argExpectedDataNodes = "-Cgateway.expected_data_nodes="
)

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

// setReplicas changes only spec.replicas.
func setReplicas(ctx context.Context, client kubernetes.Interface, ns, name string, n int32) (bool, error) {
	return updateStatefulSet(ctx, client, ns, name, func(s *appsv1.StatefulSet) bool {
		if s.Spec.Replicas != nil && *s.Spec.Replicas == n {
			return false
		}
		s.Spec.Replicas = &n
		return true
	})
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

// expectedArg finds the expected-nodes argument in the crate container's
// args or command: its prefix, or "" when there is none.
func expectedArg(s *appsv1.StatefulSet) string {
	c := crateContainerOf(&s.Spec.Template.Spec)
	if c == nil {
		return ""
	}
	for _, list := range [][]string{c.Args, c.Command} {
		for _, a := range list {
			for _, p := range []string{argExpectedDataNodes, argExpectedNodes} {
				if strings.Contains(a, p) {
					return p
				}
			}
		}
	}
	return ""
}

// setExpectedArg rewrites every expected-nodes argument (in args and
// command, also inside a shell command line) to its new value.
func setExpectedArg(s *appsv1.StatefulSet, nodes, dataNodes int) bool {
	c := crateContainerOf(&s.Spec.Template.Spec)
	if c == nil {
		return false
	}
	changed := false
	rewrite := func(list []string) {
		for i, a := range list {
			n := rewriteExpected(a, nodes, dataNodes)
			if n != a {
				list[i] = n
				changed = true
			}
		}
	}
	rewrite(c.Args)
	rewrite(c.Command)
	return changed
}

// rewriteExpected replaces the value of each expected-nodes setting in a
// (possibly multi-word) argument.
func rewriteExpected(a string, nodes, dataNodes int) string {
	words := strings.Split(a, " ")
	for i, w := range words {
		switch {
		case strings.HasPrefix(w, argExpectedDataNodes):
			words[i] = argExpectedDataNodes + strconv.Itoa(dataNodes)
		case strings.HasPrefix(w, argExpectedNodes):
			words[i] = argExpectedNodes + strconv.Itoa(nodes)
		}
	}
	return strings.Join(words, " ")
}
