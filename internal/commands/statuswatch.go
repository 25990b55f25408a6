package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// watch prints the status, then again each time it changes, until ctx ends
// (Ctrl-C) or --timeout passes; both end the watch with exit 0. Changes are
// seen through informers on the namespace's pods, StatefulSets and Leases
// (the lock), not by polling; each notification re-reads the status, and a
// document equal to the last one printed (ignoring the server time it was
// judged at) is not printed again.
func (o *StatusOptions) watch(ctx context.Context) error {
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	cl, c, err := o.discover(ctx, o.Cluster, false)
	if err != nil {
		return err
	}
	changed, stopWatch, err := watchNamespace(ctx, cl.Kube, c.Namespace)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("watching %s/%s: %w", c.Namespace, c.Name, err)
	}
	defer stopWatch()
	last, printed := "", 0
	for {
		// Drain the notifications of the initial sync: the first read
		// below sees everything they announced.
		select {
		case <-changed:
		default:
		}
		st, err := o.collect(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && printed == 0:
			return err
		case err != nil:
			// The next change reads again; one failed read does not end the watch.
			fmt.Fprintln(o.ErrOut, "WARNING: "+ErrorLine(err))
		}
		sig, err := statusSignature(st)
		if err != nil {
			return err
		}
		if st != nil && sig != last {
			last = sig
			if err := o.printWatched(st, printed); err != nil {
				return err
			}
			printed++
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// watchNamespace starts informers on ns's pods, StatefulSets and Leases (a cluster's pods,
// groups and lock) and returns a channel that receives (coalesced) once after each change,
// once their caches synced. stop ends them.
func watchNamespace(ctx context.Context, client kubernetes.Interface, ns string) (changed <-chan struct{}, stop func(), err error) {
	ch := make(chan struct{}, 1)
	notify := func() {
		select {
		case ch <- struct{}{}:
		default: // a re-read is pending already; it will see this change too
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	for _, inf := range []cache.SharedIndexInformer{
		factory.Core().V1().Pods().Informer(),
		factory.Apps().V1().StatefulSets().Informer(),
		factory.Coordination().V1().Leases().Informer(),
	} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, nil, err
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	stop = func() {
		cancel()
		factory.Shutdown()
	}
	factory.Start(wctx.Done())
	for typ, ok := range factory.WaitForCacheSync(wctx.Done()) {
		if !ok {
			stop()
			return nil, nil, fmt.Errorf("the %v cache did not sync", typ)
		}
	}
	return ch, stop, nil
}

// printWatched prints the n-th document of a watch: text ones under a line
// with the time they were read, YAML ones separated by ---, JSON ones as a
// stream of documents.
func (o *StatusOptions) printWatched(st *ClusterStatus, n int) error {
	switch {
	case o.Output == "text" || o.Output == "":
		sep := ""
		if n > 0 {
			sep = "\n"
		}
		if _, err := fmt.Fprintf(o.Out, "%s--- %s ---\n", sep, o.clockNow().UTC().Format(time.RFC3339)); err != nil {
			return err
		}
	case n > 0 && (o.Output == "yaml" || o.Output == "kyaml"):
		if _, err := fmt.Fprintln(o.Out, "---"); err != nil {
			return err
		}
	}
	return o.print(st)
}

// statusSignature is a status document without the moment it was read, so
// that two reads of an unchanged cluster compare equal.
func statusSignature(st *ClusterStatus) (string, error) {
	if st == nil {
		return "", nil
	}
	cp := *st
	if st.Lock != nil {
		l := *st.Lock
		l.ServerTime = time.Time{}
		cp.Lock = &l
	}
	b, err := json.Marshal(&cp)
	if err != nil {
		return "", fmt.Errorf("comparing status documents: %w", err)
	}
	return string(b), nil
}
