package testbed

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Host resources of the real nodes. Several test beds (test processes, sandboxes) run on one
// machine at once, so every address, link and cgroup is derived from a slot claimed in
// claimDir; a slot whose test bed is gone is cleaned and reused.
const (
	// claimDir is on tmpfs, like the addresses and links it records: a reboot clears both.
	claimDir = "/run/kubectl-dbops-realnode"
	maxSlots = 64
)

// realNodeState records one test bed's claim, in claimDir/slot-N.json and in the test bed
// folder (realnode.json), so that a later run or `sandbox down` can clean up after a killed one.
type realNodeState struct {
	Slot  int `json:"slot"`
	Nodes int `json:"nodes"`
	// Dir is the test bed folder; StateDir holds the nodes' state (containerd, kubelet).
	Dir      string `json:"dir"`
	StateDir string `json:"stateDir"`
	Pidfile  string `json:"pidfile"`
}

// Addresses: node IPs and the DNS address are /32s on lo in 10.98.<slot>.0/24; pods of a slot
// share one bridge with 10.<100+slot>.0.0/16 (node i takes 10.<100+slot>.<i>.0/24). The host
// never forwards (net.ipv4.ip_forward stays 0), so pods reach only host addresses and each
// other, never another slot's pods and never anything off the machine.
func (s realNodeState) nodeName(i int) string   { return fmt.Sprintf("realnode-%d", i) }
func (s realNodeState) nodeIP(i int) string     { return fmt.Sprintf("10.98.%d.%d", s.Slot, i) }
func (s realNodeState) dnsIP() string           { return fmt.Sprintf("10.98.%d.53", s.Slot) }
func (s realNodeState) bridge() string          { return fmt.Sprintf("dbops-rn%d", s.Slot) }
func (s realNodeState) gateway() string         { return fmt.Sprintf("10.%d.0.1", 100+s.Slot) }
func (s realNodeState) podSubnet() string       { return fmt.Sprintf("10.%d.0.0/16", 100+s.Slot) }
func (s realNodeState) podRange(i int) string   { return fmt.Sprintf("10.%d.%d", 100+s.Slot, i) }
func (s realNodeState) cgroupName(i int) string { return fmt.Sprintf("dbops-rn%d-n%d", s.Slot, i) }
func (s realNodeState) nodeDir(i int) string    { return filepath.Join(s.StateDir, fmt.Sprintf("n%d", i)) }
func (s realNodeState) containerdSock(i int) string {
	return filepath.Join(s.nodeDir(i), "containerd.sock")
}

// hostAddrs are the /32s this claim puts on lo.
func (s realNodeState) hostAddrs() []string {
	addrs := make([]string, 0, s.Nodes+1)
	for i := 1; i <= s.Nodes; i++ {
		addrs = append(addrs, s.nodeIP(i))
	}
	return append(addrs, s.dnsIP())
}

func slotPath(slot int) string { return filepath.Join(claimDir, fmt.Sprintf("slot-%d.json", slot)) }

// withClaimLock runs fn while holding an exclusive lock on claimDir/lock.
func withClaimLock(fn func() error) error {
	if err := os.MkdirAll(claimDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", claimDir, err)
	}
	f, err := os.OpenFile(filepath.Join(claimDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("open claim lock: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing unlocks too
	return fn()
}

func readState(path string) (realNodeState, error) {
	var st realNodeState
	data, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("decode %s: %w", path, err)
	}
	return st, nil
}

func writeState(path string, st realNodeState) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// claimSlot takes the first free slot for a test bed whose components are listed in pidfile.
// Every slot whose owner has no live component left is cleaned (cleanupHost) first, whichever
// slot is then taken: a killed test bed's containers, mounts and addresses do not outlive the
// next claim.
func claimSlot(dir, stateDir, pidfile string, nodes int, logf func(string, ...any)) (realNodeState, error) {
	var claimed realNodeState
	err := withClaimLock(func() error {
		for slot := range maxSlots {
			path := slotPath(slot)
			old, err := readState(path)
			if err != nil {
				if !errors.Is(err, os.ErrNotExist) {
					logf("testbed: skipping real-node slot %d: %v", slot, err)
				}
				continue
			}
			if alive, _ := PidfileAlive(old.Pidfile); alive && old.Dir != dir {
				continue
			}
			logf("testbed: cleaning real-node slot %d left by %s", slot, old.Dir)
			if err := cleanupHost(old); err != nil {
				logf("testbed: slot %d: %v", slot, err)
				continue
			}
			_ = os.Remove(path)
		}
		used, err := hostAddresses()
		if err != nil {
			return err
		}
		for slot := range maxSlots {
			path := slotPath(slot)
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				continue // held by a running test bed, or not cleaned
			}
			st := realNodeState{Slot: slot, Nodes: nodes, Dir: dir, StateDir: stateDir, Pidfile: pidfile}
			if used[st.dnsIP()] || used[st.gateway()] || linkExists(st.bridge()) {
				// Not ours to touch: something else holds these addresses.
				continue
			}
			if err := writeState(path, st); err != nil {
				return err
			}
			claimed = st
			return nil
		}
		return fmt.Errorf("no free real-node slot (all %d in %s are taken by running test beds)", maxSlots, claimDir)
	})
	return claimed, err
}

// releaseSlot removes a claim after its resources were cleaned.
func releaseSlot(st realNodeState) error {
	return withClaimLock(func() error {
		if cur, err := readState(slotPath(st.Slot)); err == nil && cur.Dir == st.Dir {
			if err := os.Remove(slotPath(st.Slot)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("release real-node slot %d: %w", st.Slot, err)
			}
		}
		return nil
	})
}

// hostAddresses lists the IPv4 addresses configured on the machine.
func hostAddresses() (map[string]bool, error) {
	out, err := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("ip addr show: %w", err)
	}
	used := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" {
				addr, _, _ := strings.Cut(f[i+1], "/")
				used[addr] = true
			}
		}
	}
	return used, nil
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// cgroupV1Mounts returns the mount points of the cgroup v1 hierarchies (cpu, memory, pids,
// name=systemd, ...), from /proc/self/mountinfo.
func cgroupV1Mounts() ([]string, error) { return cgroupMounts("cgroup") }

// cgroupAllMounts adds the cgroup v2 mount (/sys/fs/cgroup/unified on a hybrid machine), where
// the kubelet's cgroup library creates the cgroup root too.
func cgroupAllMounts() ([]string, error) {
	v1, err := cgroupMounts("cgroup")
	if err != nil {
		return nil, err
	}
	v2, err := cgroupMounts("cgroup2")
	return append(v1, v2...), err
}

func cgroupMounts(fstype string) ([]string, error) {
	var mps []string
	err := eachMount(func(fields []string) {
		// ... mountpoint(4) ... - fstype source options
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && fields[i+1] == fstype {
				mps = append(mps, unescapeMount(fields[4]))
			}
		}
	})
	return mps, err
}

// eachMount calls f with the fields of every line of /proc/self/mountinfo that has a mount
// point (field 4).
func eachMount(f func(fields []string)) error {
	file, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 5 {
			f(fields)
		}
	}
	return sc.Err()
}

// mountsUnder lists mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	var mps []string
	err := eachMount(func(fields []string) {
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mps = append(mps, mp)
		}
	})
	sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	return mps, err
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// setupHost adds the addresses, the bridge and the per-node cgroup roots of a claim.
func setupHost(st realNodeState) error {
	for _, a := range st.hostAddrs() {
		if err := ipCmd("addr", "add", a+"/32", "dev", "lo"); err != nil {
			return err
		}
	}
	// The bridge and its gateway address are made here, not by the CNI bridge plugin: with
	// isGateway the plugin would also switch on net.ipv4.ip_forward for the whole machine.
	if err := ipCmd("link", "add", st.bridge(), "type", "bridge"); err != nil {
		return err
	}
	if err := ipCmd("addr", "add", st.gateway()+"/16", "dev", st.bridge()); err != nil {
		return err
	}
	if err := ipCmd("link", "set", st.bridge(), "up"); err != nil {
		return err
	}
	mps, err := cgroupV1Mounts()
	if err != nil {
		return fmt.Errorf("list cgroup hierarchies: %w", err)
	}
	for i := 1; i <= st.Nodes; i++ {
		for _, mp := range mps {
			cg := filepath.Join(mp, st.cgroupName(i))
			if err := os.Mkdir(cg, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("create cgroup %s: %w", cg, err)
			}
			// A new cpuset has no CPUs or memory nodes, and no task could join it.
			if _, err := os.Stat(filepath.Join(mp, "cpuset.cpus")); err == nil {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					v, err := os.ReadFile(filepath.Join(mp, f))
					if err != nil {
						return fmt.Errorf("read %s: %w", f, err)
					}
					if err := os.WriteFile(filepath.Join(cg, f), v, 0o644); err != nil {
						return fmt.Errorf("write %s/%s: %w", cg, f, err)
					}
				}
			}
		}
	}
	return nil
}

// cleanupHost removes everything a claim made on the host: processes left in its cgroups and
// its containerd shims (by PID, found through the claim's own cgroups and socket paths),
// mounts under its state folder, its cgroups, bridge and addresses. It is idempotent.
func cleanupHost(st realNodeState) error {
	var errs []error
	mps, err := cgroupAllMounts()
	if err != nil {
		errs = append(errs, err)
	}
	// 1. Containers: every process in our cgroups is one of our pods'.
	for attempt := 0; attempt < 50; attempt++ {
		pids := map[int]bool{}
		for i := 1; i <= st.Nodes; i++ {
			for _, mp := range mps {
				collectCgroupPids(filepath.Join(mp, st.cgroupName(i)), pids)
			}
		}
		for pid := range shimPids(st) {
			pids[pid] = true
		}
		if len(pids) == 0 {
			break
		}
		for pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond) // the kernel reaps asynchronously; bounded by attempts
	}
	// 2. Mounts (kubelet's bind mount of its root dir, pod volumes, container root filesystems).
	if st.StateDir != "" {
		if mounts, err := mountsUnder(st.StateDir); err == nil {
			for _, mp := range mounts {
				if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
					errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
				}
			}
		}
	}
	// Pod network namespaces that containerd pinned under /run/netns and never released
	// (its sandboxes were killed, not stopped): ours have an address in the claim's pod subnet,
	// which no one else uses while the claim is held.
	if err := removeNetns(st); err != nil {
		errs = append(errs, err)
	}
	// 3. Cgroups, deepest first.
	for i := 1; i <= st.Nodes; i++ {
		for _, mp := range mps {
			if err := removeCgroupTree(filepath.Join(mp, st.cgroupName(i))); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// 4. Links and addresses (a missing one is fine: cleanup may run twice).
	if linkExists(st.bridge()) {
		if err := ipCmd("link", "del", st.bridge()); err != nil {
			errs = append(errs, err)
		}
	}
	used, err := hostAddresses()
	if err != nil {
		errs = append(errs, err)
	}
	for _, a := range st.hostAddrs() {
		if used[a] {
			if err := ipCmd("addr", "del", a+"/32", "dev", "lo"); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// removeNetns deletes the named network namespaces (containerd's cni-<uuid>) whose interfaces
// have an address in the claim's pod subnet.
func removeNetns(st realNodeState) error {
	names, err := claimNetns(st)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		if err := ipCmd("netns", "delete", name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// claimNetns lists the named network namespaces (containerd's cni-<uuid>) that have an address
// in the claim's pod subnet, which no one else uses while the claim is held.
func claimNetns(st realNodeState) ([]string, error) {
	_, subnet, err := net.ParseCIDR(st.podSubnet())
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return nil, nil //nolint:nilerr // no named namespaces at all
	}
	var names []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "cni-") {
			continue
		}
		out, err := exec.Command("ip", "-n", e.Name(), "-4", "-o", "addr", "show").Output()
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(out)) {
			if ip, _, err := net.ParseCIDR(f); err == nil && subnet.Contains(ip) {
				names = append(names, e.Name())
				break
			}
		}
	}
	return names, nil
}

func collectCgroupPids(dir string, pids map[int]bool) {
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil //nolint:nilerr // a cgroup removed while walking
		}
		data, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if err != nil {
			return nil //nolint:nilerr // idem
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				pids[pid] = true
			}
		}
		return nil
	})
}

// shimPids finds containerd-shim processes serving one of the claim's containerds: their
// command line names that containerd's socket (-address <state>/nN/containerd.sock).
func shimPids(st realNodeState) map[int]bool {
	socks := map[string]bool{}
	for i := 1; i <= st.Nodes; i++ {
		socks[st.containerdSock(i)] = true
	}
	pids := map[int]bool{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return pids
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) == 0 || !strings.Contains(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		for j := 0; j+1 < len(args); j++ {
			if args[j] == "-address" && socks[args[j+1]] {
				pids[pid] = true
			}
		}
	}
	return pids
}

func removeCgroupTree(dir string) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var errs []error
	for _, d := range dirs {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// CleanupRealNodes removes the host resources (addresses, bridge, cgroups, mounts, left-over
// container processes) of the real nodes of the test bed in dir, if it had any. Call it after
// StopPidfile for a test bed that was not stopped through Stop (a detached sandbox, a killed
// test). ctx is unused today but bounds future API calls.
func CleanupRealNodes(_ context.Context, dir string) error {
	st, err := readState(filepath.Join(dir, realNodeStateFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	if err := cleanupHost(st); err != nil {
		return err
	}
	return releaseSlot(st)
}
