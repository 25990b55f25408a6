// Command cratedb-simulator runs the CrateDB SIMULATOR (test/sim/cratedbsim) for one
// cluster of a Kubernetes namespace until SIGTERM. It is for the sandbox and tests, not for real
// clusters: it plays a CrateDB node per pod of the cluster's StatefulSets, each on free
// loopback ports, so that several simulators never share an address. With --kwok-wiring it also maps `kubectl exec` and port-forwards of those pods to
// its nodes through kwok's Exec and PortForward objects.
package main

import (
	"context"
	"crypto/tls"
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

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/cratedbsim"
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
		listenHost    = flag.String("listen-host", "127.0.0.1", "loopback address the nodes listen on (each listener on a free port)")
		debugAddr     = flag.String("debug-addr", "127.0.0.1:0", "address of the debug endpoint (/_sim/statements, /_sim/nodes); empty disables")
		debugAddrFile = flag.String("debug-addr-file", "", "file to write the debug endpoint's address to once listening")
		version       = flag.String("crate-version", "", "CrateDB version every node reports (default: the crate container's image tag)")
		tlsCert       = flag.String("tls-cert", "", "PEM certificate nodes present when their pod enables ssl.http/ssl.psql")
		tlsKey        = flag.String("tls-key", "", "PEM key of --tls-cert")
		electionErrs  = flag.Int("chaos-election-errors", 0, "statements failing after a master-eligible node left (0 = off)")
		shutdownGrace = flag.Duration("chaos-shutdown-grace", 0, "how long a stopped node stays in sys.nodes (0 = off)")
		tick          = flag.Duration("tick", 500*time.Millisecond, "pace of shard recoveries")
		shardsPerTick = flag.Int("shards-per-tick", 2, "shard copies recovered per tick")
		shardSize     = flag.Int64("shard-size", 0, "bytes per shard copy: copies recover at indices.recovery.max_bytes_per_sec (default 40mb) per node instead of --shards-per-tick (0 = off)")
		kwokWiring    = flag.Bool("kwok-wiring", false, "create kwok Exec/PortForward objects mapping each pod to its simulated node")
		podGateway    = flag.String("pod-gateway", "", "host IP where pods of the simulator image on real nodes reach their nodes (loopback or an address of --pod-gateway-interface; a free port)")
		podGatewayIf  = flag.String("pod-gateway-interface", "", "interface holding --pod-gateway (the test bed's pod bridge)")
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
	var tlsConfig *tls.Config
	if *tlsCert != "" || *tlsKey != "" {
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			return fmt.Errorf("load TLS certificate: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	logger := log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds)
	sim, err := cratedbsim.Start(ctx, cratedbsim.Config{
		Client:              client,
		Namespace:           *namespace,
		Cluster:             *cluster,
		ListenHost:          *listenHost,
		DebugAddr:           *debugAddr,
		Version:             *version,
		TLS:                 tlsConfig,
		Chaos:               cratedbsim.Chaos{ElectionErrors: *electionErrs, ShutdownGrace: *shutdownGrace},
		StateDir:            *stateDir,
		PodGateway:          *podGateway,
		PodGatewayInterface: *podGatewayIf,
		TickInterval:        *tick,
		ShardsPerTick:       *shardsPerTick,
		ShardSize:           *shardSize,
		Logf:                logger.Printf,
	})
	if err != nil {
		return err
	}
	defer sim.Close()
	logger.Printf("cratedb-simulator: following cluster %s/%s (debug endpoint %q, pod gateway %q)", *namespace, *cluster, sim.DebugAddr(), sim.PodGatewayAddr())
	if *debugAddrFile != "" {
		// Written whole, then renamed: a reader never sees half an address.
		tmp := *debugAddrFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(sim.DebugAddr()), 0o600); err != nil {
			return fmt.Errorf("write debug address: %w", err)
		}
		if err := os.Rename(tmp, *debugAddrFile); err != nil {
			return fmt.Errorf("write debug address: %w", err)
		}
	}
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
