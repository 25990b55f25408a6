package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// Forward is a running port-forward from a local loopback port to a port of a pod.
type Forward struct {
	localAddr string
	stop      chan struct{}
	stopOnce  sync.Once
	done      chan struct{}
	// err is written once before done is closed.
	err error
}

// LocalAddr is the local "127.0.0.1:port" address that reaches the pod port.
func (f *Forward) LocalAddr() string { return f.localAddr }

// Done is closed when the forward has stopped, either by Close, by cancellation of the
// context given to PortForward, or because the connection to the API server was lost.
func (f *Forward) Done() <-chan struct{} { return f.done }

// Err reports why the forward stopped; nil while running or after a requested stop.
func (f *Forward) Err() error {
	select {
	case <-f.done:
		return f.err
	default:
		return nil
	}
}

// Close stops forwarding and waits until the listener is released. It is safe to call more
// than once.
func (f *Forward) Close() error {
	f.stopOnce.Do(func() { close(f.stop) })
	<-f.done
	return nil
}

// PortForward forwards a free port on 127.0.0.1 to remotePort of a pod. It returns once the
// local listener is ready. Cancelling ctx stops the forward, as does Close.
//
// It tunnels SPDY over websockets first and falls back to plain SPDY when the API server does
// not support the websocket upgrade, like kubectl does.
func PortForward(ctx context.Context, restConfig *rest.Config, namespace, pod string, remotePort int) (*Forward, error) {
	if remotePort <= 0 || remotePort > 65535 {
		return nil, fmt.Errorf("port-forward to pod %s/%s: invalid port %d", namespace, pod, remotePort)
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("port-forward to pod %s/%s: create client: %w", namespace, pod, err)
	}
	u := client.CoreV1().RESTClient().Post().
		Resource("pods").
		Namespace(namespace).
		Name(pod).
		SubResource("portforward").
		URL()

	transport, upgrader, err := spdy.RoundTripperFor(restConfig)
	if err != nil {
		return nil, fmt.Errorf("port-forward to pod %s/%s: create SPDY transport: %w", namespace, pod, err)
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	wsDialer, err := portforward.NewSPDYOverWebsocketDialer(u, restConfig)
	if err != nil {
		return nil, fmt.Errorf("port-forward to pod %s/%s: create websocket dialer: %w", namespace, pod, err)
	}
	dialer := portforward.NewFallbackDialer(wsDialer, spdyDialer, shouldFallbackToSPDY)

	f := &Forward{stop: make(chan struct{}), done: make(chan struct{})}
	ready := make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(remotePort)}, f.stop, ready, io.Discard, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("port-forward to pod %s/%s: %w", namespace, pod, err)
	}

	go func() {
		defer close(f.done)
		if err := pf.ForwardPorts(); err != nil {
			f.err = fmt.Errorf("port-forward to pod %s/%s port %d: %w", namespace, pod, remotePort, err)
		}
	}()
	// Tie the forward to ctx without leaking this goroutine after Close.
	go func() {
		select {
		case <-ctx.Done():
			f.stopOnce.Do(func() { close(f.stop) })
		case <-f.done:
		}
	}()

	select {
	case <-ready:
	case <-f.done:
		if f.err != nil {
			return nil, f.err
		}
		return nil, fmt.Errorf("port-forward to pod %s/%s port %d: stopped before it was ready", namespace, pod, remotePort)
	case <-ctx.Done():
		_ = f.Close()
		return nil, fmt.Errorf("port-forward to pod %s/%s port %d: %w", namespace, pod, remotePort, ctx.Err())
	}

	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		_ = f.Close()
		return nil, fmt.Errorf("port-forward to pod %s/%s port %d: local port unknown: %w", namespace, pod, remotePort, errors.Join(err, errors.New("no forwarded port")))
	}
	f.localAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local)))
	return f, nil
}
