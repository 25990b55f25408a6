package testbed

import (
	"net"
	"testing"
)

// TestRealNodeSlotAddresses: every slot's addresses are distinct from every other slot's, the
// pod ranges fall inside the slot's subnet, and link names fit IFNAMSIZ.
func TestRealNodeSlotAddresses(t *testing.T) {
	seen := map[string]int{}
	for slot := range maxSlots {
		st := realNodeState{Slot: slot, Nodes: 3}
		_, subnet, err := net.ParseCIDR(st.podSubnet())
		if err != nil {
			t.Fatalf("slot %d: subnet %s: %v", slot, st.podSubnet(), err)
		}
		if len(st.bridge()) > 15 {
			t.Errorf("slot %d: bridge name %q longer than 15 bytes", slot, st.bridge())
		}
		addrs := append(st.hostAddrs(), st.gateway())
		for i := 1; i <= st.Nodes; i++ {
			for _, a := range []string{st.podRange(i) + ".2", st.podRange(i) + ".254"} {
				if !subnet.Contains(net.ParseIP(a)) {
					t.Errorf("slot %d node %d: pod address %s outside %s", slot, i, a, subnet)
				}
			}
		}
		if !subnet.Contains(net.ParseIP(st.gateway())) {
			t.Errorf("slot %d: gateway %s outside %s", slot, st.gateway(), subnet)
		}
		for _, a := range append(addrs, st.podSubnet(), st.bridge(), st.cgroupName(1)) {
			if other, ok := seen[a]; ok {
				t.Errorf("%s used by slots %d and %d", a, other, slot)
			}
			seen[a] = slot
		}
		if ip := net.ParseIP(st.nodeIP(1)); ip == nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
			t.Errorf("slot %d: node IP %s must be a routable, non-loopback address (kubelet refuses others)", slot, st.nodeIP(1))
		}
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{`/a/b`: "/a/b", `/a\040b`: "/a b", `/x\134y`: `/x\y`} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
