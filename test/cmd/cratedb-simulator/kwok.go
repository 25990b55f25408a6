package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim"
)

// kwokResource names kwok's execs and portforwards resources.
func kwokResource(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: resource}
}

// wireKwok keeps one kwok Exec and PortForward object per pod name pointing at the pod's node.
// A recreated pod keeps its name and so its mapping; new names (scale-up) get one when their
// node first runs.
func wireKwok(ctx context.Context, dyn dynamic.Interface, sim *cratedbsim.Sim, namespace string, logf func(string, ...any)) {
	done := map[string]string{} // pod -> node HTTP address it was wired to
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		for _, n := range sim.Nodes() {
			if n.Pod == "" || n.HTTPAddr == "" || done[n.Pod] == n.HTTPAddr {
				continue
			}
			if err := applyMappings(ctx, dyn, namespace, n); err != nil {
				logf("cratedb-simulator: wire pod %s: %v", n.Pod, err)
				continue
			}
			done[n.Pod] = n.HTTPAddr
			logf("cratedb-simulator: pod %s/%s -> node %s at %s", namespace, n.Pod, n.Name, n.Host)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func applyMappings(ctx context.Context, dyn dynamic.Interface, namespace string, n cratedbsim.NodeInfo) error {
	env := n.ExecEnv()
	var envs []any
	for _, k := range slices.Sorted(maps.Keys(env)) {
		envs = append(envs, map[string]any{"name": k, "value": env[k]})
	}
	execSpec := map[string]any{"execs": []any{map[string]any{"local": map[string]any{"envs": envs}}}}
	if err := apply(ctx, dyn, kwokResource("execs"), "Exec", namespace, n.Pod, execSpec); err != nil {
		return err
	}
	var forwards []any
	for podPort, addr := range map[int64]string{cratedbsim.PodPGPort: n.PGAddr, cratedbsim.PodHTTPPort: n.HTTPAddr} {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return fmt.Errorf("node %s address %q: %w", n.Name, addr, err)
		}
		p, err := strconv.ParseInt(port, 10, 32)
		if err != nil {
			return fmt.Errorf("node %s address %q: %w", n.Name, addr, err)
		}
		forwards = append(forwards, map[string]any{"ports": []any{podPort}, "target": map[string]any{"address": n.Host, "port": p}})
	}
	fwSpec := map[string]any{"forwards": forwards}
	return apply(ctx, dyn, kwokResource("portforwards"), "PortForward", namespace, n.Pod, fwSpec)
}

func apply(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, kind, namespace, name string, spec map[string]any) error {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       spec,
	}}
	if _, err := dyn.Resource(gvr).Namespace(namespace).Apply(ctx, name, obj, metav1.ApplyOptions{FieldManager: "cratedb-simulator", Force: true}); err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", kind, namespace, name, err)
	}
	return nil
}
