package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim/podgw"
)

func TestPorts(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "CRATE_JAVA_OPTS" {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name    string
		args    []string
		javaOps string
		want    string // fmt of the map, "" = error
	}{
		{"defaults", []string{"-Cnode.name=n-0", "-Ccluster.name=c"}, "", "map[http:4200 psql:5432]"},
		{"settings", []string{"-Chttp.port=4201", "-Cpsql.port=5433"}, "", "map[http:4201 psql:5433]"},
		{"operator exporter", []string{"-Cnode.name=data-hot-$(hostname | rev | cut -d- -f1 | rev)"},
			"-Dx=y -javaagent:/var/lib/crate/crate-jmx-exporter-1.2.0.jar=7071 -XX:+HeapDumpOnOutOfMemoryError", "map[exporter:7071 http:4200 psql:5432]"},
		{"not a setting", []string{"--verbose"}, "", ""},
		{"no value", []string{"-Chttp.port"}, "", ""},
		{"bad port", []string{"-Cpsql.port=70000"}, "", ""},
		{"zero port", []string{"-Chttp.port=0"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ports(tc.args, env(tc.javaOps))
			if tc.want == "" {
				if err == nil {
					t.Fatalf("ports accepted %v: %v", tc.args, got)
				}
				return
			}
			if err != nil || fmt.Sprint(got) != tc.want {
				t.Fatalf("ports(%v) = %v, %v; want %s", tc.args, got, err, tc.want)
			}
		})
	}
}

// TestForward: a client connection reaches the gateway after the hello line, in both
// directions, and the gateway closing ends the client's connection.
func TestForward(t *testing.T) {
	gw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	type seen struct {
		h    podgw.Hello
		body string
		err  error
	}
	got := make(chan seen, 1)
	go func() {
		c, err := gw.Accept()
		if err != nil {
			got <- seen{err: err}
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		h, err := podgw.Read(br)
		if err != nil {
			got <- seen{err: err}
			return
		}
		line, err := br.ReadString('\n')
		_, _ = c.Write([]byte("pong\n"))
		got <- seen{h: h, body: line, err: err}
	}()
	// The client's side is a real TCP connection, as the pod's listener would accept.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	accepted, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	h := podgw.Hello{Pod: "crate-data-hot-c-0", Service: podgw.ServicePSQL, Client: accepted.RemoteAddr().String()}
	go func() { done <- forward(ctx, accepted, gw.Addr().String(), h) }()
	_ = client.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := client.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	s := <-got
	if s.err != nil || s.h != h || s.body != "ping\n" {
		t.Fatalf("gateway saw %+v", s)
	}
	reply, err := io.ReadAll(client)
	if err != nil || string(reply) != "pong\n" {
		t.Errorf("client read %q, %v; want pong and the end", reply, err)
	}
	_ = client.Close()
	if err := <-done; err != nil {
		t.Errorf("forward: %v", err)
	}
}
