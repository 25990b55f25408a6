// Command cratedb-sim-pod is the main process of the CrateDB SIMULATOR image on the test
// bed's real nodes (test/testbed/images.go installs it as `crate`): it stands in for the
// CrateDB process of one pod. The whole cluster is modelled by one simulator process on the
// host (test/sim/cratedbsim); this program only makes the pod's own ports reach that pod's
// node there: it listens on the node's HTTP and PostgreSQL ports (-Chttp.port, -Cpsql.port,
// CrateDB's defaults 4200 and 5432) and, when CRATE_JAVA_OPTS loads the crate-jmx-exporter
// agent as the CrateDB operator does, on the agent's port; each connection is forwarded to the
// simulator's pod gateway ($CRATEDB_SIM_GATEWAY) after a hello line naming the pod (its
// hostname, which Kubernetes sets to the pod name) and the client's address as seen here.
//
// It is started as CrateDB is: `crate -C<setting>=<value> ...`. It ends on SIGTERM or SIGINT.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim/podgw"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv); err != nil {
		log.Printf("crate (simulator pod proxy): %v", err)
		os.Exit(1)
	}
}

// javaAgentPort reads the crate-jmx-exporter agent's port from CRATE_JAVA_OPTS
// (-javaagent:/var/lib/crate/crate-jmx-exporter-<v>.jar=<port>).
var javaAgentPort = regexp.MustCompile(`-javaagent:\S*crate-jmx-exporter\S*\.jar=(\d+)`)

// ports maps the services this pod serves to their ports, from CrateDB's command line and
// environment.
func ports(args []string, getenv func(string) string) (map[string]int, error) {
	out := map[string]int{podgw.ServiceHTTP: 4200, podgw.ServicePSQL: 5432}
	for _, a := range args {
		rest, ok := strings.CutPrefix(a, "-C")
		if !ok {
			return nil, fmt.Errorf("argument %q: CrateDB takes -C<setting>=<value>", a)
		}
		k, v, ok := strings.Cut(rest, "=")
		if !ok {
			return nil, fmt.Errorf("argument %q: no value", a)
		}
		var svc string
		switch k {
		case "http.port":
			svc = podgw.ServiceHTTP
		case "psql.port":
			svc = podgw.ServicePSQL
		default:
			continue
		}
		p, err := strconv.Atoi(v)
		if err != nil || p <= 0 || p > 65535 {
			return nil, fmt.Errorf("setting %s: %q is not a port", k, v)
		}
		out[svc] = p
	}
	if m := javaAgentPort.FindStringSubmatch(getenv("CRATE_JAVA_OPTS")); m != nil {
		p, err := strconv.Atoi(m[1])
		if err != nil || p <= 0 || p > 65535 {
			return nil, fmt.Errorf("CRATE_JAVA_OPTS: exporter port %q", m[1])
		}
		out[podgw.ServiceExporter] = p
	}
	return out, nil
}

func run(ctx context.Context, args []string, getenv func(string) string) error {
	gateway := getenv(podgw.EnvGateway)
	if _, _, err := net.SplitHostPort(gateway); err != nil {
		return fmt.Errorf("$%s = %q: want the simulator's pod gateway host:port", podgw.EnvGateway, gateway)
	}
	pod, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	svcPorts, err := ports(args, getenv)
	if err != nil {
		return err
	}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for svc, port := range svcPorts {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			return fmt.Errorf("listen for %s: %w", svc, err)
		}
		ls = append(ls, l)
		log.Printf("crate (simulator pod proxy): pod %s: %s on :%d -> %s", pod, svc, port, gateway)
		go serve(ctx, l, gateway, pod, svc)
	}
	<-ctx.Done()
	return nil
}

func serve(ctx context.Context, l net.Listener, gateway, pod, svc string) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := forward(ctx, c, gateway, podgw.Hello{Pod: pod, Service: svc, Client: c.RemoteAddr().String()}); err != nil && !errors.Is(err, net.ErrClosed) {
				log.Printf("crate (simulator pod proxy): %s connection from %s: %v", svc, c.RemoteAddr(), err)
			}
		}()
	}
}

// forward connects c to the gateway: a connection the node refuses is closed at once, as a
// stopped CrateDB's port would be.
func forward(ctx context.Context, c net.Conn, gateway string, h podgw.Hello) error {
	defer c.Close()
	d := net.Dialer{Timeout: 5 * time.Second}
	up, err := d.DialContext(ctx, "tcp", gateway)
	if err != nil {
		return fmt.Errorf("dial gateway: %w", err)
	}
	defer up.Close()
	if err := podgw.Write(up, h); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.Close(); _ = up.Close() })
	defer stop()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Half-close so that the other direction can finish (an HTTP response after the
		// request's end).
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
	return nil
}
