package cratedbsim

import (
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
)

// Host-based authentication as CrateDB implements it (io.crate.auth.HostBasedAuthentication):
// with auth.host_based.enabled the entries auth.host_based.config.<id>.{user,address,
// protocol,ssl,method} are tried in the order of their ids as strings (a sorted map), and the
// first entry whose user, address, protocol and TLS state match decides the method; no match
// refuses the connection. Without host-based authentication every user is trusted.

type hbaEntry struct {
	id                               string
	user, address, protocol, method  string
	hasUser, hasAddress, hasProtocol bool
	ssl                              string // on, off, optional
}

func hbaEntries(s nodeSettings) []hbaEntry {
	byID := map[string]*hbaEntry{}
	for k, v := range s {
		rest, ok := strings.CutPrefix(k, "auth.host_based.config.")
		if !ok {
			continue
		}
		id, attr, ok := strings.Cut(rest, ".")
		if !ok {
			continue
		}
		e := byID[id]
		if e == nil {
			e = &hbaEntry{id: id, method: "trust", ssl: "optional"}
			byID[id] = e
		}
		switch attr {
		case "user":
			e.user, e.hasUser = v, true
		case "address":
			e.address, e.hasAddress = v, true
		case "protocol":
			e.protocol, e.hasProtocol = v, true
		case "method":
			e.method = v
		case "ssl":
			switch strings.ToLower(v) {
			case "on", "true":
				e.ssl = "on"
			case "off", "false":
				e.ssl = "off"
			default:
				e.ssl = "optional"
			}
		}
	}
	out := make([]hbaEntry, 0, len(byID))
	for _, e := range byID {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// connInfo describes a client connection for host-based authentication.
type connInfo struct {
	protocol string // "pg" or "http"
	remote   net.IP
	tls      bool
	user     string
}

func addressMatches(hba string, ip net.IP) bool {
	if hba == "_local_" {
		return ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback)
	}
	if strings.Contains(hba, "/") {
		_, cidr, err := net.ParseCIDR(hba)
		return err == nil && cidr.Contains(ip)
	}
	if a := net.ParseIP(hba); a != nil {
		return a.Equal(ip)
	}
	return false // host names are not resolved by the simulator
}

// authMethod is the method host-based authentication picks for a connection: "trust" or
// "password"; an error when no entry matches.
func authMethod(s nodeSettings, ci connInfo) (string, error) {
	if !s.bool("auth.host_based.enabled", false) {
		return "trust", nil
	}
	for _, e := range hbaEntries(s) {
		if e.hasUser && e.user != ci.user {
			continue
		}
		if e.hasAddress && !addressMatches(e.address, ci.remote) {
			continue
		}
		if e.hasProtocol && e.protocol != ci.protocol {
			continue
		}
		if (e.ssl == "on" && !ci.tls) || (e.ssl == "off" && ci.tls) {
			continue
		}
		// jwt needs a bearer token and cert a client certificate, which the simulator's
		// clients never send: such entries do not match.
		if e.method != "trust" && e.method != "password" {
			continue
		}
		return e.method, nil
	}
	msg := fmt.Sprintf("No valid auth.host_based entry found for host \"%s\", user \"%s\". Did you enable TLS in your client?", ci.remote, ci.user)
	if ci.protocol == "http" {
		msg = fmt.Sprintf("No valid auth.host_based.config entry found for host \"%s\", user \"%s\", protocol \"http\". Did you enable TLS in your client?", ci.remote, ci.user)
	}
	return "", &SQLError{SQLState: "28000", HTTPStatus: http.StatusUnauthorized, Code: 4010, Message: msg}
}

// remoteIP is the IP of a "host:port" address.
func remoteIP(addr string) net.IP {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return net.ParseIP(host)
}

// nodeSettingsOf returns the settings of a running node.
func (s *Sim) nodeSettingsOf(node string) nodeSettings {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.m.nodes[node]; n != nil && n.settings != nil {
		return n.settings
	}
	return nodeSettings{}
}

// login authenticates a connection: it resolves the method, then checks the user (trust) or
// the password (password). needPassword asks the caller to obtain one first (pg).
func (s *Sim) login(node string, ci connInfo, password string, given bool) (needPassword bool, err error) {
	method, err := authMethod(s.nodeSettingsOf(node), ci)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.m.users[ci.user]
	if method == "trust" {
		if u == nil {
			return false, &SQLError{SQLState: "28000", HTTPStatus: http.StatusUnauthorized, Code: 4010,
				Message: fmt.Sprintf("trust authentication failed for user \"%s\"", ci.user)}
		}
		return false, nil
	}
	if !given {
		return true, nil
	}
	if u == nil || u.pwHash == "" || hashPassword(password) != u.pwHash {
		return true, errAuth(ci.user)
	}
	return true, nil
}
