package cratedb

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// What the StatefulSets say about reaching CrateDB: ports, TLS and the
// host-based authentication a local crash runs under. Read from the crate
// container's spec and -C settings, never assumed (docs/procedures.md, CrateDB).

// Default ports (docs/procedures.md, CrateDB), used when the spec names none.
const (
	defaultHTTPPort = 4200
	defaultPGPort   = 5432
)

// crateSpec is what the master-eligible StatefulSet's crate container says.
type crateSpec struct {
	HTTPPort, PGPort int
	HTTPSSL, PGSSL   bool
	// HBA is host-based authentication enabled; TrustUser is the user of
	// a trust entry that covers local connections ("" = any user), and
	// HasTrust whether there is one.
	HBA       bool
	HasTrust  bool
	TrustUser string
}

// settingsOf returns the -C settings of a container (command and args,
// also inside a shell command line), later ones winning.
func settingsOf(c *corev1.Container) map[string]string {
	out := map[string]string{}
	for _, list := range [][]string{c.Command, c.Args} {
		for _, a := range list {
			for _, w := range shellWords(a) {
				kv, ok := strings.CutPrefix(w, "-C")
				if !ok {
					continue
				}
				if k, v, ok := strings.Cut(kv, "="); ok {
					out[k] = v
				}
			}
		}
	}
	return out
}

func isTrue(v string) bool { b, _ := strconv.ParseBool(strings.TrimSpace(v)); return b }

// specOf reads the crate container of g's StatefulSet.
func specOf(g *ops.NodeGroup) crateSpec {
	s := crateSpec{HTTPPort: defaultHTTPPort, PGPort: defaultPGPort}
	if g == nil || ops.StatefulSetOf(g) == nil {
		return s
	}
	c := crateContainerOf(&ops.StatefulSetOf(g).Spec.Template.Spec)
	if c == nil {
		return s
	}
	for _, p := range c.Ports {
		switch strings.ToLower(p.Name) {
		case "http", "crate-web", "crate-http", "web":
			s.HTTPPort = int(p.ContainerPort)
		case "postgres", "psql", "pg", "postgresql", "crate-postgres":
			s.PGPort = int(p.ContainerPort)
		}
	}
	set := settingsOf(c)
	// The settings are what CrateDB binds to; they win over port names.
	if n, err := strconv.Atoi(set["http.port"]); err == nil && n > 0 {
		s.HTTPPort = n
	}
	if n, err := strconv.Atoi(set["psql.port"]); err == nil && n > 0 {
		s.PGPort = n
	}
	s.HTTPSSL = isTrue(set["ssl.http.enabled"])
	s.PGSSL = isTrue(set["ssl.psql.enabled"])
	s.HBA = isTrue(set["auth.host_based.enabled"])
	// Entries are auth.host_based.config.<id>.<field>; CrateDB matches
	// them in order of their ids.
	entries := map[string]map[string]string{}
	for k, v := range set {
		rest, ok := strings.CutPrefix(k, "auth.host_based.config.")
		if !ok {
			continue
		}
		id, field, ok := strings.Cut(rest, ".")
		if !ok {
			continue
		}
		if entries[id] == nil {
			entries[id] = map[string]string{}
		}
		entries[id][field] = v
	}
	ids := make([]string, 0, len(entries))
	for id := range entries {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, ea := strconv.Atoi(ids[i])
		b, eb := strconv.Atoi(ids[j])
		if ea != nil || eb != nil {
			return ids[i] < ids[j]
		}
		return a < b
	})
	for _, id := range ids {
		e := entries[id]
		if e["method"] != "trust" || (e["protocol"] != "" && e["protocol"] != "http") {
			continue
		}
		switch e["address"] {
		case "", "_local_", "127.0.0.1", "127.0.0.1/32", "::1", "localhost":
			if s.HTTPSSL && e["ssl"] == "off" {
				continue
			}
			s.HasTrust, s.TrustUser = true, e["user"]
		}
		if s.HasTrust {
			break
		}
	}
	return s
}

// crashUser is the user crash logs in as: the configured one, else the
// user of the local trust entry, else crash's own default.
func (e *Engine) crashUser(s crateSpec) (string, error) {
	switch {
	case e.cfg.CrashUser != "":
		return e.cfg.CrashUser, nil
	case !s.HBA:
		return "", nil
	case s.HasTrust:
		return s.TrustUser, nil
	}
	return "", ops.Usagef("host-based authentication of this cluster has no trust entry for local connections, and crash cannot send a password without a prompt; add one (the CrateDB operator trusts user crate on _local_) or name a trusted user with --crash-user")
}

// crashBase is crash's argv without statements: they go on stdin.
func (e *Engine) crashBase(s crateSpec, user string) []string {
	scheme := e.cfg.HTTPScheme
	if scheme == "" {
		scheme = "http"
		if s.HTTPSSL {
			scheme = "https"
		}
	}
	argv := []string{"crash", "--verify-ssl=false", "--host", fmt.Sprintf("%s://localhost:%d", scheme, s.HTTPPort)}
	if user != "" {
		argv = append(argv, "--username", user)
	}
	return argv
}

// ClusterTLS reports what the cluster's StatefulSets say about the
// PostgreSQL protocol: its port and whether it requires TLS.
func ClusterTLS(c *ops.Cluster) (port int, pgTLS bool) {
	s := specOf(masterEligible(c))
	return s.PGPort, s.PGSSL
}
