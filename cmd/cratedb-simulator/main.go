// Command cratedb-simulator runs the CrateDB SIMULATOR (internal/sim/cratedbsim) for one
// cluster of a Kubernetes namespace until SIGTERM. It is for the sandbox and tests, not for real
// clusters: it plays a CrateDB node per pod of the cluster's StatefulSets on loopback
// addresses. With --kwok-wiring it also maps `kubectl exec` and port-forwards of those pods to
// its nodes through kwok's Exec and PortForward objects.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-dbops/kubectl-dbops/internal/sim/cratedbsim"
)

func main() {
	if err := run(); err != nil {
		log.Printf("cratedb-simulator: %v", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		kubeconfig    = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster whose pods the simulator follows")
		namespace     = flag.String("namespace", "default", "namespace of the CrateDB cluster")
		cluster       = flag.String("cluster", "", "CrateDB cluster name (StatefulSets crate-master-<cluster>, crate-data-<group>-<cluster>)")
		stateDir      = flag.String("state-dir", "", "folder keeping users, license, settings and tables across restarts")
		addrBase      = flag.String("addr-base", "127.0.2", "first three octets of the nodes' loopback addresses")
		firstHost     = flag.Int("first-host", 1, "last octet of the first node's address")
		pgPort        = flag.Int("pg-port", 5432, "PostgreSQL wire protocol port of every node")
		httpPort      = flag.Int("http-port", 4200, "HTTP port of every node")
		debugAddr     = flag.String("debug-addr", "", "address of the debug endpoint (/_sim/statements, /_sim/nodes); empty disables")
		tick          = flag.Duration("tick", 500*time.Millisecond, "pace of shard recoveries")
		shardsPerTick = flag.Int("shards-per-tick", 2, "shard copies recovered per tick")
		kwokWiring    = flag.Bool("kwok-wiring", false, "create kwok Exec/PortForward objects mapping each pod to its simulated node")
	)
	flag.Parse()
	if *cluster == "" {
		return fmt.Errorf("--cluster is required")
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	logger := log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds)
	sim, err := cratedbsim.Start(ctx, cratedbsim.Config{
		Client:        client,
		Namespace:     *namespace,
		Cluster:       *cluster,
		AddrBase:      *addrBase,
		FirstHost:     *firstHost,
		PGPort:        *pgPort,
		HTTPPort:      *httpPort,
		DebugAddr:     *debugAddr,
		StateDir:      *stateDir,
		TickInterval:  *tick,
		ShardsPerTick: *shardsPerTick,
		Logf:          logger.Printf,
	})
	if err != nil {
		return err
	}
	defer sim.Close()
	logger.Printf("cratedb-simulator: following cluster %s/%s (debug endpoint %q)", *namespace, *cluster, sim.DebugAddr())
	if *kwokWiring {
		dyn, err := dynamic.NewForConfig(restConfig)
		if err != nil {
			return fmt.Errorf("create dynamic client: %w", err)
		}
		go wireKwok(ctx, dyn, sim, *namespace, logger.Printf)
	}
	<-ctx.Done()
	logger.Printf("cratedb-simulator: stopping")
	return nil
}
