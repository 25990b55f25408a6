package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fleet"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/discovery"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// listHealthTimeout bounds each cluster's health read in `list`: one slow database must not
// hold up the whole list.
const listHealthTimeout = 10 * time.Second

// ClusterSummary is one row of `list` (`-o json|yaml`: items of a ClusterList).
type ClusterSummary struct {
	// Context is the kubeconfig context of the cluster (fleet mode only).
	Context   string `json:"context,omitempty"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Engine    string `json:"engine,omitempty"`
	// Groups are "name ready/desired" per node group.
	Groups []string `json:"groups,omitempty"`
	Pods   int      `json:"pods"`
	Ready  int      `json:"ready"`
	Health string   `json:"health,omitempty"`
	// LockHolder is who holds the lock now ("" when free or expired).
	LockHolder string `json:"lockHolder,omitempty"`
	// Unfinished is the operation an interrupted, failed or timed-out run left in the
	// journal ("" when none).
	Unfinished string `json:"unfinished,omitempty"`
	// OperatorPaused says the cluster's operator is paused (FoundationDB spec.skip), by whom.
	OperatorPaused string `json:"operatorPaused,omitempty"`
	// Error says why the cluster could not be read (the row shows what could).
	Error string `json:"error,omitempty"`
}

// ListOptions holds `list` flags.
type ListOptions struct {
	*GlobalOptions
	// RunFlags are the shared run flags this command reads (--dry-run, the lock's, --timeout).
	RunFlags      *RunFlags
	AllNamespaces bool
	NoHeaders     bool
	fleet         fleetFlags
	// clusterSel is -l: only the clusters whose labels match (fleet_select.go).
	clusterSel labels.Selector
}

// NewListOptions returns options bound to the shared flags.
func NewListOptions(g *GlobalOptions, rf *RunFlags) *ListOptions {
	return &ListOptions{GlobalOptions: g, RunFlags: rf}
}

// NewListCmd builds `list`.
func NewListCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	o := NewListOptions(g, rf)
	cmd := &cobra.Command{
		Use:         "list [-A] [--contexts GLOB]",
		Aliases:     []string{"ls"},
		Annotations: documentAnnotations(),
		Short:       "List the database clusters in the namespace (or all with -A): engine, groups, health, lock, unfinished operation",
		Example: `  kubectl dbops list -n prod
  kubectl dbops list -A -o json | jq -r '.items[] | select(.lockHolder != "") | .name'

  # Every cluster of every namespace in the contexts prod-eu and prod-us, two at a time
  kubectl dbops list -A --contexts 'prod-*' --max-parallel 2

  # Only the clusters labelled tier=db (the labels on all their StatefulSets, or their operator resource)
  kubectl dbops list -A --contexts 'prod-*' -l tier=db`,
		Args: noArgs,
		RunE: runOptions(o),
	}
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "List the clusters of every namespace")
	cmd.Flags().BoolVar(&o.NoHeaders, "no-headers", false, "Leave out the table's column headers (-o text)")
	o.fleet.addFlags(cmd, g)
	return cmd
}

// Complete has nothing to take.
func (o *ListOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate checks flags without touching the API.
func (o *ListOptions) Validate() error {
	if err := o.GlobalOptions.Validate(); err != nil {
		return err
	}
	if err := o.RunFlags.Validate(); err != nil {
		return err
	}
	if o.RunFlags.DryRun {
		return ops.Usagef("--dry-run does not apply to list (it never changes anything)")
	}
	if o.Selector != "" {
		sel, err := parseClusterSelector(o.Selector)
		if err != nil {
			return err
		}
		o.clusterSel = sel
	}
	return o.fleet.validate(o.GlobalOptions)
}

// Run lists the clusters.
func (o *ListOptions) Run(cmd *cobra.Command) error {
	ctx := commandContext(cmd)
	if o.fleet.active(o.GlobalOptions) {
		return o.runFleet(ctx)
	}
	ns := ""
	if !o.AllNamespaces {
		var err error
		if ns, err = o.Namespace(); err != nil {
			return err
		}
	}
	rows, err := o.rows(ctx, ns, "")
	if err != nil {
		return err
	}
	doc, err := documentList(rows, "ClusterList", "ClusterSummary", "", ns, func(r ClusterSummary) string { return r.Name })
	if err != nil {
		return err
	}
	return o.printDocument(o.Out, doc, func(w io.Writer) error { return o.writeList(w, rows, ns) })
}

// rows reads the row of every cluster of ns ("" = all namespaces), or only of the cluster
// named only (a fleet target naming one: the others' rows are not read), which must exist.
func (o *ListOptions) rows(ctx context.Context, ns, only string) ([]ClusterSummary, error) {
	cl, err := o.Clients()
	if err != nil {
		return nil, err
	}
	// The namespace's StatefulSets and the nodes, read once for all its clusters (list_memo.go).
	kube := memoizeLists(cl.Kube)
	var found []namespacedName
	if o.clusterSel != nil {
		if found, err = selectClusters(ctx, cl, kube, ns, o.clusterSel, only, ops.ResourceRecognizers(o.recognizers())); err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, noClusterSelected(ns, only, o.Selector)
		}
	} else {
		if found, err = clusterNames(ctx, kube, ns); err != nil {
			return nil, err
		}
		found = sortedNames(append(found, operatorClusterNames(ctx, cl, ns, ops.ResourceRecognizers(o.recognizers()))...))
		if only != "" {
			found = slices.DeleteFunc(found, func(n namespacedName) bool { return n.Name != only })
			if len(found) == 0 {
				return nil, noClusterSelected(ns, only, "")
			}
		}
	}
	// Read once for every row: who the lock status is judged for.
	id, err := o.RunFlags.ResolveLockID(o.ConfigFlags)
	if err != nil {
		return nil, err
	}
	rows := make([]ClusterSummary, len(found))
	var wg sync.WaitGroup
	for i, f := range found {
		wg.Go(func() { rows[i] = o.summarize(ctx, cl, kube, id, f.Namespace, f.Name) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return rows, nil
}

// runFleet lists the clusters of every target of the fleet, at most --max-parallel contexts
// at once. A target that cannot be listed (unreachable, RBAC) is reported on its own line
// naming its context; the others are still listed, and the exit code is the worst target's.
func (o *ListOptions) runFleet(ctx context.Context) error {
	ts, err := o.fleet.targets(o.GlobalOptions, nil, o.AllNamespaces)
	if err != nil {
		return err
	}
	pool := newClientsPool(o.GlobalOptions)
	per := make([][]ClusterSummary, len(ts))
	rs := runFleetReads(ctx, &o.fleet, ts, func(ctx context.Context, t fleet.Target, _ <-chan struct{}) error {
		i := slices.Index(ts, t)
		lo := &ListOptions{GlobalOptions: fleetTargetOptions(o.GlobalOptions, pool, t), RunFlags: o.RunFlags, AllNamespaces: t.Namespace == "", clusterSel: o.clusterSel}
		rows, err := lo.rows(ctx, t.Namespace, t.Cluster)
		if err != nil {
			return err
		}
		for _, r := range rows {
			r.Context = t.Context
			per[i] = append(per[i], r)
		}
		return nil
	})
	var rows []ClusterSummary
	namespaces := map[string]bool{}
	for i := range per {
		rows = append(rows, per[i]...)
		namespaces[ts[i].Namespace] = true
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	doc, err := documentList(rows, "ClusterList", "ClusterSummary", "", "", func(r ClusterSummary) string { return r.Name })
	if err != nil {
		return err
	}
	if errs := fleetErrors(rs); len(errs) > 0 {
		doc.Object["errors"] = errs
	}
	// The namespace column is shown when the targets' namespaces differ (or are all of them).
	showNS := o.AllNamespaces || len(namespaces) > 1
	if err := o.printDocument(o.Out, doc, func(w io.Writer) error { return o.writeFleetList(w, rows, showNS) }); err != nil {
		return err
	}
	reportTargetErrors(o.GlobalOptions, rs)
	return fleetFailure(rs)
}

// summarize reads one cluster's row; what cannot be read goes to Error. Discovery reads
// through kube (rows' memoized lists); the lock and health read live through cl.
func (o *ListOptions) summarize(ctx context.Context, cl *Clients, kube kubernetes.Interface, id, ns, name string) ClusterSummary {
	row := ClusterSummary{Namespace: ns, Name: name}
	c, err := discovery.Discover(ctx, kube, discovery.Options{Namespace: ns, Name: name, Engine: o.Engine,
		Engines: o.engineNames(), Recognizers: o.recognizers(), Dynamic: cl.Dynamic})
	if err != nil {
		row.Error = err.Error()
		return row
	}
	row.Engine = c.Engine
	for _, g := range c.Groups {
		row.Groups = append(row.Groups, fmt.Sprintf("%s %d/%d", g.Name, g.Ready, g.Desired))
		for _, p := range g.Pods {
			row.Pods++
			if p.Ready {
				row.Ready++
			}
		}
	}
	var errs []string
	lm := &lock.Manager{Client: cl.Kube, Namespace: ns, Cluster: name, ID: id, Duration: o.RunFlags.LockDuration, Clock: cl.Clock}
	if st, err := lm.Status(ctx); err != nil {
		errs = append(errs, "lock: "+err.Error())
	} else {
		if st.Held {
			row.LockHolder = st.Holder
		}
		if j := st.Journal; j != nil && j.State != ops.JournalSucceeded {
			extra := ""
			if j.ETA != nil && j.State == ops.JournalRunning {
				extra += ", ETA " + j.ETA.Range()
			}
			if j.Blocked != nil {
				extra += ", blocked on " + j.Blocked.On
			}
			row.Unfinished = fmt.Sprintf("%s %s (%s, %d/%d done%s)", j.Operation, j.Args, j.StateText(), len(j.Done), j.Steps, extra)
		}
	}
	if eng, err := o.engine(ctx, cl, c); err == nil {
		hctx, cancel := context.WithTimeout(ctx, listHealthTimeout)
		h, err := eng.Health(hctx, c)
		cancel()
		switch {
		case err != nil:
			row.Health = "unknown"
			errs = append(errs, "health: "+err.Error())
		case h != nil:
			row.Health = h.Status
		}
		if ctl, ok := eng.(ops.OperatorControl); ok && ctl.OperatorResource(c) != nil {
			// A paused operator reconciles nothing: the row says so, whatever the health.
			if p := ctl.OperatorLocks(ctx, c, false, time.Now()).Paused; p != nil {
				row.OperatorPaused = p.Description
				row.Health = dash(row.Health) + " (operator paused)"
			}
		}
		if cl, ok := eng.(ops.Closer); ok {
			_ = cl.Close(context.WithoutCancel(ctx))
		}
	}
	row.Error = strings.Join(errs, "; ")
	return row
}

func (o *ListOptions) writeList(w io.Writer, rows []ClusterSummary, ns string) error {
	if len(rows) == 0 {
		where := fmt.Sprintf("namespace %q", ns)
		if o.AllNamespaces {
			where = "any namespace"
		}
		_, err := ops.Fprintf(w, "no database clusters in %s\n", where)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if !o.NoHeaders {
		head := "NAME\tENGINE\tGROUPS\tREADY\tHEALTH\tLOCK\tUNFINISHED"
		if o.AllNamespaces {
			head = "NAMESPACE\t" + head
		}
		fmt.Fprintln(tw, head)
	}
	for _, r := range rows {
		if o.AllNamespaces {
			ops.Fprintf(tw, "%s\t", r.Namespace)
		}
		ops.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", r.Name, dash(r.Engine), dash(strings.Join(r.Groups, ", ")),
			r.Ready, r.Pods, dash(r.Health), dash(r.LockHolder), dash(r.Unfinished))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Error != "" {
			ops.Fprintf(w, "WARNING: %s/%s: %s\n", r.Namespace, r.Name, r.Error)
		}
	}
	return nil
}

// writeFleetList is writeList in fleet mode: a CONTEXT column first.
func (o *ListOptions) writeFleetList(w io.Writer, rows []ClusterSummary, showNS bool) error {
	if len(rows) == 0 {
		_, err := ops.Fprintf(w, "no database clusters in the fleet's targets\n")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if !o.NoHeaders {
		head := "CONTEXT\t"
		if showNS {
			head += "NAMESPACE\t"
		}
		fmt.Fprintln(tw, head+"NAME\tENGINE\tGROUPS\tREADY\tHEALTH\tLOCK\tUNFINISHED")
	}
	for _, r := range rows {
		ops.Fprintf(tw, "%s\t", r.Context)
		if showNS {
			ops.Fprintf(tw, "%s\t", r.Namespace)
		}
		ops.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", r.Name, dash(r.Engine), dash(strings.Join(r.Groups, ", ")),
			r.Ready, r.Pods, dash(r.Health), dash(r.LockHolder), dash(r.Unfinished))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Error != "" {
			ops.Fprintf(w, "WARNING: %s/%s/%s: %s\n", r.Context, r.Namespace, r.Name, r.Error)
		}
	}
	return nil
}

// namespacedName is a cluster found by clusterNames.
type namespacedName struct{ Namespace, Name string }

// clusterNames finds the database clusters of ns ("" = all namespaces) by their
// StatefulSets, as discovery names them: the dbops.io/cluster label, the CrateDB operator's
// name label, else the StatefulSet's own name. Sorted by namespace, then name.
func clusterNames(ctx context.Context, client kubernetes.Interface, ns string) ([]namespacedName, error) {
	list, err := client.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing StatefulSets: %w", err)
	}
	seen := map[namespacedName]bool{}
	var out []namespacedName
	for i := range list.Items {
		n := namespacedName{list.Items[i].Namespace, clusterNameOf(&list.Items[i])}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return sortedNames(out), nil
}

// operatorClusterNames finds the clusters an operator runs without StatefulSets (the
// FoundationDB operator's FoundationDBClusters): the resources of rs, the engines' resource
// recognizers, in ns ("" = all). Where a resource is not installed, or may not be listed, it
// has none.
func operatorClusterNames(ctx context.Context, cl *Clients, ns string, rs []ops.ResourceRecognizer) []namespacedName {
	if cl.Dynamic == nil {
		return nil
	}
	var out []namespacedName
	for _, r := range rs {
		list, err := cl.Dynamic.Resource(r.Resource()).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, u := range list.Items {
			out = append(out, namespacedName{u.GetNamespace(), u.GetName()})
		}
	}
	return out
}

// sortedNames sorts clusters by namespace, then name.
func sortedNames(names []namespacedName) []namespacedName {
	sort.Slice(names, func(i, j int) bool {
		if names[i].Namespace != names[j].Namespace {
			return names[i].Namespace < names[j].Namespace
		}
		return names[i].Name < names[j].Name
	})
	return names
}

// clusterNameOf is the cluster a StatefulSet belongs to, as discovery finds it by name.
func clusterNameOf(s *appsv1.StatefulSet) string {
	switch name := s.Labels[discovery.LabelCluster]; {
	case name != "":
		return name
	case strings.HasPrefix(s.Name, "crate-") && s.Labels["app.kubernetes.io/name"] != "":
		return s.Labels["app.kubernetes.io/name"]
	default:
		return s.Name
	}
}

// didYouMean adds to err, a cluster name that discovery did not find in ns, the closest
// name that it would find, if one is close.
func didYouMean(ctx context.Context, cl *Clients, ns, name string, rs []ops.ResourceRecognizer, err error) error {
	var ce *ops.CodedError
	if !errors.As(err, &ce) || !errors.Is(err, ops.ErrUsage) || !strings.HasPrefix(ce.Msg, fmt.Sprintf("no database cluster %q", name)) {
		return err
	}
	found, lerr := clusterNames(ctx, cl.Kube, ns)
	if lerr != nil {
		return err
	}
	// Clusters an operator runs without StatefulSets (FoundationDBClusters) are names too.
	found = append(found, operatorClusterNames(ctx, cl, ns, rs)...)
	best, bestD := "", len(name)/3+2
	for _, f := range found {
		if d := ops.EditDistance(strings.ToLower(name), strings.ToLower(f.Name)); d < bestD {
			best, bestD = f.Name, d
		}
	}
	if best == "" {
		return err
	}
	return &ops.CodedError{Kind: ops.ErrUsage, Msg: fmt.Sprintf("%s; did you mean %q?", ce.Msg, best), Err: err}
}
