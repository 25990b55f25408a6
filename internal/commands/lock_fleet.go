package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"sync"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// lock and deny over a fleet (#39): every subcommand takes --contexts, --context A,B or
// --fleet and runs its normal single-cluster form on each target, in the target's own context
// (its own Lease, deny list, Events and API calls: never one call for two targets).
//
// The reading ones (lock status, deny list) read like `status` over a fleet. The writing ones
// (lock acquire|release, deny add|allow) run like a fleet restart (runMutationFleet): --dry-run
// says per target what would be written; one confirmation names the contexts and clusters
// (none possible: exit 2, nothing written); a summary and the worst target's exit code end the
// run. Unlike restart, --fail-fast is off by default: each target's write is one small change
// independent of the others, and a user freezing or unfreezing a fleet (an incident, a runaway
// pipeline) wants every target it can get, with the ones refused (a lock someone else holds,
// RBAC, no such cluster) reported by context; --fail-fast stops starting targets after the
// first failure, --canary N writes the first N targets first.
//
// Without a CLUSTER, -l SELECTOR (-A: in every namespace) selects each target's clusters by
// their labels (fleet_select.go), each cluster then a target of its own: the reading ones read
// every matching cluster (a target with none is reported, the others are read); the writing
// ones find every target's clusters before anything starts (selectFleetClusters: a target with
// none, or that cannot be listed, stops the run before any write).

// addReadFleetFlags binds the fleet flags of a reading subcommand (lock status, deny list).
func (o *LockOptions) addReadFleetFlags(cmd *cobra.Command, g *GlobalOptions) {
	o.fleet.fleetFlags.addFlags(cmd, g)
	o.clusterSel.addFlags(cmd)
}

// addWriteFleetFlags binds the fleet flags of a writing subcommand: restart's, with
// --fail-fast off by default (above).
func (o *LockOptions) addWriteFleetFlags(cmd *cobra.Command, g *GlobalOptions) {
	o.fleet.addFlags(cmd, g)
	o.clusterSel.addFlags(cmd)
	f := cmd.Flags().Lookup("fail-fast")
	o.fleet.FailFast = false
	f.DefValue = "false"
	f.Usage = "Fleet: after a target fails, start no other (default: every target is tried; each one's refusal is reported)"
}

// printDocument is GlobalOptions.printDocument, except that a fleet target's -o json|yaml
// document goes to collect, for the fleet's one list (every subcommand prints through here).
func (o *LockOptions) printDocument(w io.Writer, obj runtime.Object, text func(io.Writer) error) error {
	if o.collect != nil && o.Output != "" && o.Output != "text" {
		o.collect(obj)
		return nil
	}
	return o.GlobalOptions.printDocument(w, obj, text)
}

// forTarget is o over target t with g, its options (fleetTargetOptions: its context's clients
// and namespace): the cluster t names, output to out and errOut, its own run flags with
// --dry-run as dryRun, -o json|yaml documents to collect (nil: printed), and no fleet of its own.
func (o *LockOptions) forTarget(g *GlobalOptions, t fleet.Target, out, errOut io.Writer, dryRun bool, collect func(runtime.Object)) *LockOptions {
	if o.Cluster == "" {
		// -l selected the cluster: its discovery finds it by name, not by the selector.
		g.Selector = ""
	}
	g.IOStreams = genericiooptions.IOStreams{In: o.In, Out: out, ErrOut: errOut}
	lo := *o
	rf := *o.RunFlags
	rf.DryRun = dryRun
	lo.GlobalOptions, lo.RunFlags, lo.Cluster, lo.fleet, lo.clusterSel = g, &rf, t.Cluster, fleetMutationFlags{}, clusterSelect{}
	lo.found, lo.clients, lo.collect = nil, nil, collect
	return &lo
}

// fleetWrite names a writing subcommand for its refusal ("refusing to VERB 2 clusters ...")
// and its question ("QUESTION 2 clusters ...?").
type fleetWrite struct{ verb, question string }

// runFleet runs a lock or deny subcommand over the fleet: one is the subcommand's run with a
// target's options; w names a writing subcommand (nil: a reading one).
func (o *LockOptions) runFleet(cmd *cobra.Command, w *fleetWrite, one func(lo *LockOptions) error) error {
	ctx := commandContext(cmd)
	ts, err := o.clusterSel.targets(o.GlobalOptions, &o.fleet.fleetFlags, o.Cluster)
	if err != nil {
		return err
	}
	if w == nil {
		return o.readFleet(ctx, ts, one)
	}
	if o.clusterSel.selecting() {
		// Every target's clusters, every target answering, before anything is written.
		if ts, err = selectFleetClusters(ctx, o.GlobalOptions, &o.fleet.fleetFlags, ts, o.clusterSel.sel); err != nil {
			return err
		}
	}
	pool := newClientsPool(o.GlobalOptions)
	r := NewRunner(o.Factory, o.RunFlags, o.GlobalOptions)
	// The documents of the dry run and of the run, per target.
	var docMu sync.Mutex
	docs := map[bool][]runtime.Object{true: make([]runtime.Object, len(ts)), false: make([]runtime.Object, len(ts))}
	return runMutationFleet(ctx, cmd, r, o.GlobalOptions, &o.fleet, ts, fleetMutation{verb: w.verb, question: w.question, documents: true,
		one: func(_ context.Context, t fleet.Target, out, errOut io.Writer, _ ops.Sink, _ <-chan struct{}, dryRun, preview bool) error {
			i := indexOf(ts, t)
			lo := o.forTarget(fleetTargetOptions(o.GlobalOptions, pool, t), t, out, errOut, dryRun, func(obj runtime.Object) {
				docMu.Lock()
				defer docMu.Unlock()
				docs[dryRun][i] = obj
			})
			if preview {
				// The plans before the question are read by a person.
				lo.Output, lo.collect = "text", nil
			}
			return one(lo)
		},
		summary: func(rs []fleet.Result, dryRun bool) error {
			outcome := func(r fleet.Result) string {
				if dryRun && r.Started && r.Err == nil {
					return ops.OutcomeDryRun
				}
				return r.Outcome()
			}
			if o.Output == "text" || o.Output == "" {
				return writeFleetSummary(r, rs, outcome)
			}
			return o.printFleetList(ts, docs[dryRun], rs, outcome)
		}})
}

// readFleet reads every cluster of every target (lock status, deny list), at most
// --max-parallel targets at once (runFleetClusterReads: a target's own cluster, or those -l or
// -A select): on -o text each cluster's output under a "Context:" line, else one list of the
// clusters' documents; a target that cannot be read (or selects no cluster) is named on its
// own line of stderr, and the exit code is the worst target's.
func (o *LockOptions) readFleet(ctx context.Context, ts []fleet.Target, one func(lo *LockOptions) error) error {
	type read struct {
		t   fleet.Target
		out bytes.Buffer
		doc runtime.Object
	}
	var mu sync.Mutex
	per := make([][]*read, len(ts))
	rs := runFleetClusterReads(ctx, o.GlobalOptions, &o.fleet.fleetFlags, ts, o.clusterSel.sel, func(_ context.Context, i int, cg *GlobalOptions, ct fleet.Target) error {
		r := &read{t: ct}
		errOut := &targetWriter{mu: &mu, w: o.ErrOut, prefix: "[" + ct.String() + "] ", context: ct.Context}
		defer func() { _ = errOut.flush() }()
		if err := one(o.forTarget(cg, ct, &r.out, errOut, o.RunFlags.DryRun, func(obj runtime.Object) { r.doc = obj })); err != nil {
			return err
		}
		mu.Lock()
		per[i] = append(per[i], r)
		mu.Unlock()
		return nil
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	var cts []fleet.Target
	var docs []runtime.Object
	for _, p := range per {
		for _, r := range p {
			if o.Output == "text" || o.Output == "" {
				if _, err := ops.Fprintf(o.Out, "Context:  %s\n", r.t.Context); err != nil {
					return err
				}
				if _, err := o.Out.Write(append(r.out.Bytes(), '\n')); err != nil {
					return err
				}
			}
			cts, docs = append(cts, r.t), append(docs, r.doc)
		}
	}
	if o.Output != "text" && o.Output != "" {
		if err := o.printFleetList(cts, docs, rs, fleet.Result.Outcome); err != nil {
			return err
		}
	}
	reportTargetErrors(o.GlobalOptions, rs)
	return fleetFailure(rs)
}

// printFleetList prints the targets' documents as one list (kind List): each item a target's
// document with its "context"; "errors" the targets that failed, "targets" every target's
// outcome (one not started is in neither items nor errors, and never silently missing).
func (o *LockOptions) printFleetList(ts []fleet.Target, docs []runtime.Object, rs []fleet.Result, outcome func(fleet.Result) string) error {
	list := &unstructured.UnstructuredList{Object: map[string]any{}}
	list.SetAPIVersion(StatusAPIVersion)
	list.SetKind("List")
	list.Items = []unstructured.Unstructured{}
	for i, d := range docs {
		u, ok := d.(runtime.Unstructured)
		if d == nil || !ok {
			continue
		}
		item := maps.Clone(u.UnstructuredContent())
		item["context"] = ts[i].Context
		list.Items = append(list.Items, unstructured.Unstructured{Object: item})
	}
	if errs := fleetErrors(rs); len(errs) > 0 {
		list.Object["errors"] = errs
	}
	var targets []fleetSummaryTarget
	for _, r := range rs {
		st := fleetSummaryTarget{Context: r.Target.Context, Namespace: r.Target.Namespace, Cluster: r.Target.Cluster,
			Outcome: outcome(r), Duration: r.Duration, ReasonCode: r.Reason()}
		if r.Err != nil {
			st.Error = oneLineErr(r.Err)
		}
		targets = append(targets, st)
	}
	b, err := json.Marshal(targets)
	if err != nil {
		return fmt.Errorf("encoding the fleet's targets: %w", err)
	}
	var v []any
	if err := utiljson.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("encoding the fleet's targets: %w", err)
	}
	list.Object["targets"] = v
	return o.GlobalOptions.printDocument(o.Out, list, nil)
}
