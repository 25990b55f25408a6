package fdbsim

import (
	"maps"
	"net"
	"strconv"
	"strings"
)

// Cluster files may name coordinators by hostname (FoundationDB 7.1+; the FoundationDB
// operator's spec.routing.useDNSInClusterFile writes <pod>.<cluster>.<namespace>.svc.<domain>,
// internal/pod_models.go GetPodDNSName). The model keeps the cluster file's entries as written
// and resolves them through its DNS table whenever it needs a process:
//   - client.coordinators lists the entries as written (fdbclient/MonitorLeader.cpp
//     ClientLeaderRegInterface::getAddressString: the hostname when there is one);
//   - the coordinator role goes to the processes the entries resolve to
//     (fdbserver/Status.actor.cpp: tryResolveHostnames, then addCoordinatorRole);
//   - `coordinators HOST:PORT …` takes hostnames (fdbclient/NativeAPI / CoordinatorsCommand
//     parse Hostname entries) and, like addresses, needs a running process behind each.

// SetDNS replaces the model's DNS table (hostname -> IP), as a cluster's DNS serves its pods'
// current IPs.
func (c *Cluster) SetDNS(hosts map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dns = maps.Clone(hosts)
}

// resolve is the address a cluster file entry names now: the entry itself for
// IP:PORT[:tls], the host's IP from the DNS table for HOST:PORT[:tls] ("" when it does not
// resolve; Hostname::resolve).
func (c *Cluster) resolve(entry string) string {
	if validAddress(entry) {
		return entry
	}
	if !validHostname(entry) {
		return ""
	}
	tls := strings.HasSuffix(entry, ":tls")
	host, port, _ := net.SplitHostPort(strings.TrimSuffix(entry, ":tls"))
	ip, ok := c.dns[host]
	if !ok {
		return ""
	}
	a := net.JoinHostPort(ip, port)
	if tls {
		a += ":tls"
	}
	return a
}

// isCoordinator: one of the cluster file's entries resolves to address.
func (c *Cluster) isCoordinator(address string) bool {
	if address == "" {
		return false
	}
	for _, e := range c.coordinators {
		if c.resolve(e) == address {
			return true
		}
	}
	return false
}

// coordinatorProcess is the process a cluster file entry resolves to (nil when none).
func (c *Cluster) coordinatorProcess(entry string) *process {
	a := c.resolve(entry)
	if a == "" {
		return nil
	}
	return c.byAddress(a)
}

// validHostname accepts HOST:PORT[:tls] with a DNS name as host (flow/Hostname.cpp
// Hostname::isHostname: not an IP, letters, digits, '-' and '.').
func validHostname(entry string) bool {
	host, port, err := net.SplitHostPort(strings.TrimSuffix(entry, ":tls"))
	if err != nil || host == "" || net.ParseIP(host) != nil {
		return false
	}
	for _, r := range host {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	p, err := strconv.Atoi(port)
	return err == nil && p > 0 && p < 65536
}
