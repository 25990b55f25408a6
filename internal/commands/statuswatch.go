package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// watch prints the status, then again each time it changes, until ctx ends
// (Ctrl-C) or --timeout passes; both end the watch with exit 0. Changes are
// seen through informers on the namespace's pods, StatefulSets and Leases
// (the lock), not by polling; each notification re-reads the status, and a
// document equal to the last one printed (ignoring the server time it was
// judged at) is not printed again.
func (o *StatusOptions) watch(ctx context.Context) error {
	if o.RunFlags.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.RunFlags.Timeout)
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
	// Health that lives only in the database (FoundationDB's status json has no watch) is read
	// again every interval; an operator's resource (a FoundationDBCluster) is watched.
	var tick <-chan time.Time
	if eng, err := o.engine(ctx, cl, c); err == nil {
		if p, ok := eng.(ops.HealthPoller); ok && p.HealthPollInterval() > 0 {
			t := time.NewTicker(p.HealthPollInterval())
			defer t.Stop()
			tick = t.C
		}
	}
	crChanged, stopCR, err := watchControllers(ctx, cl.Dynamic, c, ops.ResourceRecognizers(o.recognizers()))
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("watching %s/%s: %w", c.Namespace, c.Name, err)
	}
	defer stopCR()
	last, printed := "", 0
	var tw textWatch
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
			if err := o.printWatched(st, printed, &tw); err != nil {
				return err
			}
			printed++
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-crChanged:
		case <-tick:
		}
	}
}

// watchNamespace starts informers on ns's pods, StatefulSets and Leases (a cluster's pods,
// groups and lock) and returns a channel that receives (coalesced) once after each change,
// once their caches synced. stop ends them.
func watchNamespace(ctx context.Context, client kubernetes.Interface, ns string) (changed <-chan struct{}, stop func(), err error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	return startInformers(ctx, []cache.SharedIndexInformer{
		factory.Core().V1().Pods().Informer(),
		factory.Apps().V1().StatefulSets().Informer(),
		factory.Coordination().V1().Leases().Informer(),
	}, factory.Start, factory.Shutdown)
}

// watchControllers watches the operator resources that recreate c's pods (the
// FoundationDBCluster of an FDB cluster: its status carries the operator's view of health), of
// the kinds the engines' recognizers rs read; the channel is nil when there are none.
func watchControllers(ctx context.Context, dyn dynamic.Interface, c *ops.Cluster, rs []ops.ResourceRecognizer) (changed <-chan struct{}, stop func(), err error) {
	var gvrs []schema.GroupVersionResource
	for _, g := range c.Groups {
		kind := g.Owner.Ref(c.Namespace).Kind
		for _, r := range rs {
			if gvr := r.Resource(); kind == r.Kind() && r.Engine() == c.Engine && !slices.Contains(gvrs, gvr) {
				gvrs = append(gvrs, gvr)
			}
		}
	}
	if dyn == nil || len(gvrs) == 0 {
		return nil, func() {}, nil
	}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, c.Namespace, nil)
	var infs []cache.SharedIndexInformer
	for _, gvr := range gvrs {
		infs = append(infs, factory.ForResource(gvr).Informer())
	}
	return startInformers(ctx, infs, factory.Start, factory.Shutdown)
}

// startInformers gives infs one coalescing change channel (it receives once after any number
// of changes), starts them and waits for their caches; stop ends them.
func startInformers(ctx context.Context, infs []cache.SharedIndexInformer, start func(<-chan struct{}), shutdown func()) (changed <-chan struct{}, stop func(), err error) {
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
	synced := make([]cache.InformerSynced, 0, len(infs))
	for _, inf := range infs {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, nil, err
		}
		synced = append(synced, inf.HasSynced)
	}
	wctx, cancel := context.WithCancel(ctx)
	stop = func() {
		cancel()
		shutdown()
	}
	start(wctx.Done())
	if !cache.WaitForCacheSync(wctx.Done(), synced...) {
		stop()
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("the informer caches did not sync")
	}
	return ch, stop, nil
}

// printWatched prints the n-th document of a watch: text ones as kubectl get -w does, the
// first whole and then, under a line with the time they were read, only the lines that
// changed (a pod's row, the lock, the health; a row that is gone as "gone: ..."); YAML ones
// separated by ---, JSON ones as a stream of documents.
func (o *StatusOptions) printWatched(st *ClusterStatus, n int, w *textWatch) error {
	switch {
	case o.Output == "text" || o.Output == "":
		now := o.clockNow()
		if n == 0 {
			w.base = now
		}
		// Ages are rendered against the first status's time for the comparison, so a pod
		// that did not change compares equal however long the watch runs.
		var cmp, shown strings.Builder
		if err := writeStatusText(&cmp, st, w.base, o.NoHeaders, o.wide); err != nil {
			return err
		}
		if err := writeStatusText(&shown, st, now, o.NoHeaders, o.wide); err != nil {
			return err
		}
		cmpLines := strings.Split(strings.TrimRight(cmp.String(), "\n"), "\n")
		prev := w.lines
		w.lines = cmpLines
		if n == 0 {
			_, err := fmt.Fprintf(o.Out, "--- %s ---\n%s", now.UTC().Format(time.RFC3339), shown.String())
			return err
		}
		// The two renders differ only in ages: their lines correspond one to one.
		shownLines := strings.Split(strings.TrimRight(shown.String(), "\n"), "\n")
		old := map[string]int{}
		for _, l := range prev {
			old[l]++
		}
		var out strings.Builder
		for i, l := range cmpLines {
			if old[l] > 0 {
				old[l]--
				continue
			}
			if strings.TrimSpace(l) == "" || i >= len(shownLines) {
				continue
			}
			out.WriteString(shownLines[i] + "\n")
		}
		for _, l := range prev {
			if old[l] > 0 && strings.TrimSpace(l) != "" {
				old[l]--
				out.WriteString("gone: " + strings.TrimSpace(l) + "\n")
			}
		}
		if out.Len() == 0 {
			return nil
		}
		_, err := fmt.Fprintf(o.Out, "--- %s ---\n%s", now.UTC().Format(time.RFC3339), out.String())
		return err
	case n > 0 && (o.Output == "yaml" || o.Output == "kyaml"):
		if _, err := fmt.Fprintln(o.Out, "---"); err != nil {
			return err
		}
	}
	return o.print(st)
}

// textWatch is what a text watch keeps between prints.
type textWatch struct {
	base  time.Time
	lines []string
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
	// What changes with time alone (uptimes, seconds remaining) is not a change.
	if h := st.Health; h != nil && (len(h.Volatile) > 0 || (h.Table != nil && len(h.Table.VolatileColumns) > 0)) {
		hc := *h
		hc.Details = maps.Clone(h.Details)
		hc.Values = maps.Clone(h.Values)
		for _, k := range h.Volatile {
			if _, ok := hc.Details[k]; ok {
				hc.Details[k] = ""
			}
			// The typed value holds the same reading (seconds remaining); whether it is set
			// at all still counts.
			if v, ok := hc.Values[k]; ok && v != nil {
				hc.Values[k] = true
			}
		}
		if h.Table != nil {
			tc := *h.Table
			tc.Rows = make([][]string, len(h.Table.Rows))
			for i, r := range h.Table.Rows {
				tc.Rows[i] = slices.Clone(r)
				for _, col := range h.Table.VolatileColumns {
					if col < len(r) {
						tc.Rows[i][col] = ""
					}
				}
			}
			hc.Table = &tc
		}
		cp.Health = &hc
	}
	b, err := json.Marshal(&cp)
	if err != nil {
		return "", fmt.Errorf("comparing status documents: %w", err)
	}
	return string(b), nil
}
