// Package podgw is the line a CrateDB simulator pod proxy (test/cmd/cratedb-sim-pod) sends before
// it forwards a connection to the simulator's pod gateway (cratedbsim.Config.PodGateway): which
// pod it runs in, which of the node's ports the client connected to, and the client's
// address as the pod saw it (host-based authentication decides on it, as CrateDB does on the
// peer address). It is kept apart so that the proxy in the image does not link the simulator.
package podgw

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
)

// magic starts every hello line; a version bump changes it.
const magic = "CRATEDB-SIM/1"

// maxHello bounds a hello line.
const maxHello = 512

// The node ports a pod proxy forwards.
const (
	ServiceHTTP = "http" // CrateDB's HTTP endpoint (-Chttp.port, 4200)
	ServicePSQL = "psql" // PostgreSQL wire protocol (-Cpsql.port, 5432)
	// ServiceExporter is the port of the crate-jmx-exporter Java agent the CrateDB operator
	// loads into every node (its readiness probe asks /ready there).
	ServiceExporter = "exporter"
)

// EnvGateway names the pod gateway's address (host:port) in the proxy's environment.
const EnvGateway = "CRATEDB_SIM_GATEWAY"

// podName is a DNS label (a StatefulSet pod name).
var podName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// Hello is the first line of a forwarded connection.
type Hello struct {
	Pod     string
	Service string
	// Client is the client's address as the pod saw it (host:port).
	Client string
}

func (h Hello) validate() error {
	if !podName.MatchString(h.Pod) {
		return fmt.Errorf("pod name %q is not a DNS label", h.Pod)
	}
	switch h.Service {
	case ServiceHTTP, ServicePSQL, ServiceExporter:
	default:
		return fmt.Errorf("service %q: want %s, %s or %s", h.Service, ServiceHTTP, ServicePSQL, ServiceExporter)
	}
	host, _, err := net.SplitHostPort(h.Client)
	if err != nil || net.ParseIP(host) == nil {
		return fmt.Errorf("client address %q is not ip:port", h.Client)
	}
	return nil
}

// Write sends h as one line.
func Write(w io.Writer, h Hello) error {
	if err := h.validate(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s %s %s %s\n", magic, h.Pod, h.Service, h.Client)
	return err
}

// Read reads one hello line from r (nothing beyond it).
func Read(r *bufio.Reader) (Hello, error) {
	var line []byte
	for {
		b, err := r.ReadByte()
		if err != nil {
			return Hello{}, fmt.Errorf("read hello: %w", err)
		}
		if b == '\n' {
			break
		}
		line = append(line, b)
		if len(line) > maxHello {
			return Hello{}, errors.New("hello line too long")
		}
	}
	f := strings.Split(string(line), " ")
	if len(f) != 4 || f[0] != magic {
		return Hello{}, fmt.Errorf("not a %s hello line", magic)
	}
	h := Hello{Pod: f[1], Service: f[2], Client: f[3]}
	if err := h.validate(); err != nil {
		return Hello{}, err
	}
	return h, nil
}
