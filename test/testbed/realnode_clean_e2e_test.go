//go:build e2e

package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestRealNodeStopCleansHost starts real nodes with a running container (its own mounts,
// cgroups, network namespace and shim), then checks both ways a test bed's host resources go:
// a test bed killed with everything it started (as `go test -timeout` or kill -9 leaves it)
// is cleaned by the next test bed (its start clears stale test bed folders, its claim of a
// real-node slot clears stale claims elsewhere), and Stop leaves nothing behind. Needs the
// binaries and root: go test -tags e2e -run TestRealNodeStopCleansHost ./test/testbed/
func TestRealNodeStopCleansHost(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	if err := RealNodeSupport(ctx, true); err != nil {
		if RealNodesRequired() {
			t.Fatalf("real nodes unavailable, and required (CI=true or DBOPS_REQUIRE_REAL_NODES=1): %v", err)
		}
		t.Skip("real nodes unavailable: " + err.Error())
	}

	// 1. A test bed that is killed: its components die, its containers and host resources stay.
	killed := StartT(t, Options{Nodes: 1, Zones: []string{"zone-x"}})
	st1 := startRealNodeWithPod(ctx, t, killed)
	before := hostTraces(t, st1)
	t.Logf("killed test bed's claim (slot %d) holds %d traces, e.g. %v", st1.Slot, len(before), first(before, 4))
	if !hasTrace(before, "process ") || !hasTrace(before, "mount ") || !hasTrace(before, "cgroup ") || !hasTrace(before, "netns ") {
		t.Fatalf("a running real node should hold processes, mounts, cgroups and a pod netns; traces: %v", before)
	}
	// Should this test fail, do not leave the killed claim behind (runs before its Stop).
	t.Cleanup(func() { _ = cleanupHost(st1); _ = releaseSlot(st1) })
	killed.mu.Lock()
	killed.real = nil // a killed process cleans nothing
	procs := append([]*process(nil), killed.procs...)
	killed.mu.Unlock()
	for _, p := range procs {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-ctx.Done():
			t.Fatalf("%s did not die on SIGKILL", p.name)
		}
	}
	if left := hostTraces(t, st1); !hasTrace(left, "process ") || !hasTrace(left, "mount ") {
		t.Fatalf("after the kill the containers and mounts should still be there (the check could not fail otherwise); traces: %v", left)
	}

	// 2. The next test bed cleans the killed one's slot, whichever slot it takes.
	next := StartT(t, Options{Nodes: 1, Zones: []string{"zone-x"}})
	st2 := startRealNodeWithPod(ctx, t, next)
	if st2.Slot != st1.Slot {
		if left := hostTraces(t, st1); len(left) > 0 {
			t.Errorf("the next test bed (slot %d) left the killed test bed's slot %d with: %v", st2.Slot, st1.Slot, left)
		}
	} else if left := stateDirTraces(t, st1); len(left) > 0 {
		// Same slot, same names: only what lives under the old state folder tells them apart.
		t.Errorf("the next test bed took slot %d over but left the killed test bed's %v", st1.Slot, left)
	}

	// 3. Stop removes everything the real nodes held.
	if len(hostTraces(t, st2)) == 0 {
		t.Fatal("the running real node shows no traces: the check below could not fail")
	}
	if err := next.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if left := hostTraces(t, st2); len(left) > 0 {
		t.Errorf("after Stop the real nodes left: %v", left)
	}
	for _, p := range next.procs {
		if p.running() {
			t.Errorf("%s still running after Stop", p.name)
		}
	}
}

// startRealNodeWithPod starts one real node on tb and runs a pod with an emptyDir volume on it
// until Ready; it returns the test bed's claim.
func startRealNodeWithPod(ctx context.Context, t *testing.T, tb *Testbed) realNodeState {
	t.Helper()
	if err := tb.StartRealNodes(ctx, 1); err != nil {
		t.Fatalf("start real nodes: %v", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: "default", Labels: map[string]string{"app": "held"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Volumes:                       []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{{
				Name:            "sh",
				Image:           ImageShell,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"sh", "-c", "while :; do sleep 1; done"},
				VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
		},
	}
	OnRealNodes(&pod.Spec)
	if _, err := tb.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	if err := tb.WaitPodsReady(ctx, "default", "app=held", 1); err != nil {
		t.Fatalf("pod on the real node: %v", err)
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.real == nil {
		t.Fatal("no real-node claim")
	}
	return tb.real.st
}

// hostTraces lists what the claim st holds on this machine: processes in its cgroups or
// serving its containerds, mounts under its state folder, cgroups, the bridge, addresses, pod
// network namespaces and the slot's claim file.
func hostTraces(t *testing.T, st realNodeState) []string {
	t.Helper()
	traces := stateDirTraces(t, st)
	mps, err := cgroupAllMounts()
	if err != nil {
		t.Fatal(err)
	}
	pids := map[int]bool{} // the shims are listed by stateDirTraces
	for i := 1; i <= st.Nodes; i++ {
		for _, mp := range mps {
			dir := filepath.Join(mp, st.cgroupName(i))
			if _, err := os.Stat(dir); err == nil {
				traces = append(traces, "cgroup "+dir)
				collectCgroupPids(dir, pids)
			}
		}
	}
	for pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			traces = append(traces, fmt.Sprintf("process %d", pid))
		}
	}
	if linkExists(st.bridge()) {
		traces = append(traces, "link "+st.bridge())
	}
	used, err := hostAddresses()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range st.hostAddrs() {
		if used[a] {
			traces = append(traces, "address "+a)
		}
	}
	ns, err := claimNetns(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		traces = append(traces, "netns "+n)
	}
	if cur, err := readState(slotPath(st.Slot)); err == nil && cur.Dir == st.Dir {
		traces = append(traces, "claim "+slotPath(st.Slot))
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	sort.Strings(traces)
	return traces
}

// stateDirTraces lists the mounts under the claim's state folder and the container processes
// that serve its containerds (whose sockets are in that folder).
func stateDirTraces(t *testing.T, st realNodeState) []string {
	t.Helper()
	var traces []string
	mounts, err := mountsUnder(st.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		traces = append(traces, "mount "+m)
	}
	for pid := range shimPids(st) {
		traces = append(traces, fmt.Sprintf("process %d (containerd-shim)", pid))
	}
	return traces
}

func hasTrace(traces []string, prefix string) bool {
	for _, tr := range traces {
		if len(tr) >= len(prefix) && tr[:len(prefix)] == prefix {
			return true
		}
	}
	return false
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }
