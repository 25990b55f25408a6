package commands

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops/lock"
)

// ReportOptions holds `report` flags.
type ReportOptions struct {
	*GlobalOptions
	// RunFlags are the shared run flags this command reads (--dry-run, the lock's, --timeout).
	RunFlags *RunFlags
	Cluster  string
	// File is the bundle to write (-f); Force overwrites an existing one.
	File  string
	Force bool
	// Logs adds the last LogLines lines of each pod's containers (--logs): they may hold
	// anything the database printed, so they are opt-in.
	Logs     bool
	LogLines int64
}

// Manifest is manifest.json of a bundle: what is in it and what was left out, and why.
type Manifest struct {
	Cluster   string            `json:"cluster"`
	Namespace string            `json:"namespace"`
	Engine    string            `json:"engine"`
	Created   time.Time         `json:"created"`
	Version   string            `json:"version"`
	Included  []string          `json:"included"`
	Omitted   map[string]string `json:"omitted"`
	Redacted  []string          `json:"redacted"`
}

// NewReportOptions returns options bound to the shared flags.
func NewReportOptions(g *GlobalOptions, rf *RunFlags) *ReportOptions {
	return &ReportOptions{GlobalOptions: g, RunFlags: rf, LogLines: 2000}
}

// NewReportCmd builds `report CLUSTER -f bundle.zip`.
func NewReportCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	o := NewReportOptions(g, rf)
	cmd := &cobra.Command{
		Use:   "report CLUSTER -f bundle.zip [--logs] [--force]",
		Short: "Write a support bundle (zip) for a hand-off: status, plan, journal, history, lock, Events, objects, diagnostics",
		Long: `Collect, read-only, what the next engineer (or a vendor) needs about a cluster
into one zip file: status (text, JSON, YAML), the plan of a rolling restart
(dry run), the journal and history, the lock Lease and deny list, the Events of
the cluster's objects, the objects themselves (managed fields and
last-applied annotations stripped), the database's own diagnostics
(FoundationDB status json, CrateDB sys.checks and sys.allocations, etcd
endpoint status) and, with --logs, the pods' recent logs.

Secrets and ConfigMaps the pods use are included as their keys only, and env
values whose names look like credentials are replaced by "<redacted>".
manifest.json lists what is in the bundle, what was left out and why.

No lock is taken and nothing is written to the cluster. The file is written
atomically (a temporary file renamed); an existing file is kept unless --force.`,
		Example: `  kubectl dbops report mycrate -n prod -f mycrate-INC-42.zip
  kubectl dbops report myfdb -f myfdb.zip --logs --force`,
		Args:              clusterArg,
		ValidArgsFunction: completeClusters(g),
		RunE:              runOptions(o),
	}
	cmd.Flags().StringVarP(&o.File, "file", "f", "", "The zip file to write (required)")
	cmd.Flags().BoolVar(&o.Force, "force", false, "Overwrite the file if it exists")
	cmd.Flags().BoolVar(&o.Logs, "logs", false, "Include the pods' recent container logs (they may hold anything the database printed)")
	cmd.Flags().Int64Var(&o.LogLines, "log-lines", o.LogLines, "With --logs, the last N lines of each container")
	return cmd
}

// Complete fills in arguments.
func (o *ReportOptions) Complete(_ *cobra.Command, args []string) error {
	o.Cluster = args[0]
	return nil
}

// Validate checks flags without touching the API.
func (o *ReportOptions) Validate() error {
	if err := o.GlobalOptions.Validate(); err != nil {
		return err
	}
	if err := o.RunFlags.Validate(); err != nil {
		return err
	}
	if o.File == "" {
		return ops.Usagef("report needs -f FILE (the zip file to write)")
	}
	if o.LogLines <= 0 {
		return ops.Usagef("--log-lines must be 1 or more, got %d", o.LogLines)
	}
	if o.RunFlags.DryRun {
		return ops.Usagef("--dry-run does not apply to report (it never changes the cluster)")
	}
	if o.Output != "" && o.Output != "text" {
		return ops.Usagef("-o %s does not apply to report (the bundle holds every format)", o.Output)
	}
	if _, err := os.Lstat(o.File); err == nil && !o.Force {
		return ops.Usagef("%s exists; refusing to overwrite it (pass --force, or another -f)", o.File)
	}
	return nil
}

// bundle is the files of a report in the making.
type bundle struct {
	files    map[string][]byte
	manifest *Manifest
}

func (b *bundle) add(name string, data []byte) {
	b.files[name] = data
	b.manifest.Included = append(b.manifest.Included, name)
}

func (b *bundle) omit(name string, err error) {
	b.manifest.Omitted[name] = err.Error()
}

func (b *bundle) addJSON(name string, v any) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		b.omit(name, err)
		return
	}
	b.add(name, append(data, '\n'))
}

// Run collects and writes the bundle.
func (o *ReportOptions) Run(cmd *cobra.Command) error {
	ctx := commandContext(cmd)
	cl, c, err := o.discover(ctx, o.Cluster, false)
	if err != nil {
		return err
	}
	b := &bundle{files: map[string][]byte{}, manifest: &Manifest{Cluster: c.Name, Namespace: c.Namespace, Engine: c.Engine,
		Created: cl.Clock.Now().UTC(), Version: Version, Omitted: map[string]string{},
		Redacted: []string{"Secret and ConfigMap values (keys kept)", "env values named like credentials (" + credentialName.String() + ")",
			"metadata.managedFields, last-applied-configuration annotations"}}}
	o.collectStatus(ctx, b)
	o.collectLock(ctx, cl, c, b)
	eng, err := o.engine(ctx, cl, c)
	if err != nil {
		b.omit("plan/", err)
		b.omit("diagnostics/", err)
	} else {
		defer closeEngine(ctx, eng)
		o.collectPlan(ctx, cl, c, eng, b)
		if d, ok := eng.(ops.Diagnoser); ok {
			for _, x := range d.Diagnostics(ctx, c) {
				if x.Err != nil {
					b.omit("diagnostics/"+x.Name, x.Err)
				} else {
					b.add("diagnostics/"+x.Name, x.Data)
				}
			}
		} else {
			b.omit("diagnostics/", fmt.Errorf("engine %s has no database diagnostics", c.Engine))
		}
	}
	pods := o.collectObjects(ctx, cl, c, b)
	o.collectEvents(ctx, cl, c, pods, b)
	if o.Logs {
		o.collectLogs(ctx, cl, c.Namespace, pods, b)
	} else {
		b.omit("logs/", errors.New("not asked for (--logs)"))
	}
	sort.Strings(b.manifest.Included)
	b.addJSON("manifest.json", b.manifest)
	if err := writeZipAtomically(o.File, b.files, o.Force); err != nil {
		return err
	}
	_, err = fmt.Fprintf(o.Out, "wrote %s: %d files, %d left out (see manifest.json)\n", o.File, len(b.files), len(b.manifest.Omitted))
	return err
}

// collectStatus prints status as `status -o text|json|yaml` would, into the bundle.
func (o *ReportOptions) collectStatus(ctx context.Context, b *bundle) {
	so := &StatusOptions{GlobalOptions: o.GlobalOptions, RunFlags: o.RunFlags, Cluster: o.Cluster}
	st, err := so.collect(ctx)
	if err != nil {
		b.omit("status/", err)
		return
	}
	out, format := o.Out, o.Output
	defer func() { o.Out, o.Output = out, format }()
	for _, f := range []string{"text", "json", "yaml"} {
		var buf bytes.Buffer
		o.Out, o.Output = &buf, f
		name := "status/status." + f
		if f == "text" {
			name = "status/status.txt"
		}
		if err := so.print(st); err != nil {
			b.omit(name, err)
			continue
		}
		b.add(name, buf.Bytes())
	}
}

// collectLock adds the lock's state (holder, deny list and its history, journal), the Lease
// itself and the history of finished runs.
func (o *ReportOptions) collectLock(ctx context.Context, cl *Clients, c *ops.Cluster, b *bundle) {
	m := lock.NewManager(cl.Kube, c.Namespace, c.Name, "reader", cl.Clock)
	st, err := m.Status(ctx)
	if err != nil {
		b.omit("lock/state.json", err)
	} else {
		b.addJSON("lock/state.json", st)
		b.addJSON("lock/journal.json", st.Journal)
		b.addJSON("lock/deny-list.json", map[string]any{"denyList": st.DenyList, "denyHistory": st.DenyHistory})
		if l, err := cl.Kube.CoordinationV1().Leases(c.Namespace).Get(ctx, st.Lease, metav1.GetOptions{}); err != nil {
			b.omit("lock/lease.yaml", err)
		} else {
			o.addObject(b, "lock/lease.yaml", l)
		}
	}
	items, unfinished, err := m.History(ctx)
	if err != nil {
		b.omit("history.json", err)
		return
	}
	b.addJSON("history.json", History{Cluster: c.Name, Namespace: c.Namespace, Items: items, Unfinished: unfinished})
}

// collectPlan adds the plan of a rolling restart (pod mode) as --dry-run shows it, and its
// preflight's answer.
func (o *ReportOptions) collectPlan(ctx context.Context, cl *Clients, c *ops.Cluster, eng ops.Engine, b *bundle) {
	p, err := eng.PlanRestart(ctx, c, ops.RestartOptions{Mode: ops.ModePod})
	if err != nil {
		b.omit("plan/restart.txt", err)
		return
	}
	prev := o.RunFlags.unfinishedJournal(ctx, cl, c)
	v := dryRunView(p, prev)
	var text bytes.Buffer
	if err := ops.WritePlanText(&text, v); err != nil {
		b.omit("plan/restart.txt", err)
	} else {
		b.add("plan/restart.txt", text.Bytes())
	}
	b.addJSON("plan/restart.json", v)
	pre := "the restart's preflight passes\n"
	if err := preflight(ctx, p, prev); err != nil {
		pre = "a restart would refuse now: " + err.Error() + "\n"
	}
	b.add("plan/restart-preflight.txt", []byte(pre))
}

// collectObjects adds the cluster's StatefulSets, pods, PVCs, services and controllers'
// resources, and the Secrets and ConfigMaps the pods use as keys only. It returns the pods.
func (o *ReportOptions) collectObjects(ctx context.Context, cl *Clients, c *ops.Cluster, b *bundle) []corev1.Pod {
	ns := c.Namespace
	var pods []corev1.Pod
	secrets, configMaps, claims := sets.New[string](), sets.New[string](), sets.New[string]()
	for _, g := range c.Groups {
		if sts := ops.StatefulSetName(g); sts != "" {
			if s, err := cl.Kube.AppsV1().StatefulSets(ns).Get(ctx, sts, metav1.GetOptions{}); err != nil {
				b.omit("objects/statefulset/"+sts+".yaml", err)
			} else {
				o.addObject(b, "objects/statefulset/"+s.Name+".yaml", s)
				refsOf(&s.Spec.Template.Spec, secrets, configMaps)
			}
		}
		if ref := ops.ControllerOf(g); ref != nil && ref.Object != nil {
			u := &unstructured.Unstructured{Object: ref.Object}
			o.addObject(b, "objects/"+strings.ToLower(ref.Kind)+"/"+ref.Name+".yaml", u)
		}
		for _, p := range g.Pods {
			pod, err := cl.Kube.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				b.omit("objects/pod/"+p.Name+".yaml", err)
				continue
			}
			pods = append(pods, *pod)
			o.addObject(b, "objects/pod/"+pod.Name+".yaml", pod)
			refsOf(&pod.Spec, secrets, configMaps)
			for _, v := range pod.Spec.Volumes {
				if v.PersistentVolumeClaim != nil {
					claims.Insert(v.PersistentVolumeClaim.ClaimName)
				}
			}
		}
	}
	for _, name := range sets.List(claims) {
		if pvc, err := cl.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			b.omit("objects/persistentvolumeclaim/"+name+".yaml", err)
		} else {
			o.addObject(b, "objects/persistentvolumeclaim/"+name+".yaml", pvc)
		}
	}
	for _, name := range sets.List(secrets) {
		s, err := cl.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			b.omit("objects/secret/"+name+".yaml", err)
			continue
		}
		keys := make([]string, 0, len(s.Data)+len(s.StringData))
		for k := range s.Data {
			keys = append(keys, k)
		}
		for k := range s.StringData {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		o.addYAML(b, "objects/secret/"+name+".yaml", map[string]any{"kind": "Secret", "name": name, "type": string(s.Type), "keys": keys,
			"note": "values redacted by kubectl dbops report"})
	}
	for _, name := range sets.List(configMaps) {
		m, err := cl.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			b.omit("objects/configmap/"+name+".yaml", err)
			continue
		}
		var keys []string
		for k := range m.Data {
			keys = append(keys, k)
		}
		for k := range m.BinaryData {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		o.addYAML(b, "objects/configmap/"+name+".yaml", map[string]any{"kind": "ConfigMap", "name": name, "keys": keys,
			"note": "values redacted by kubectl dbops report"})
	}
	return pods
}

// refsOf records the Secrets and ConfigMaps a pod spec uses.
func refsOf(spec *corev1.PodSpec, secrets, configMaps sets.Set[string]) {
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			secrets.Insert(v.Secret.SecretName)
		}
		if v.ConfigMap != nil {
			configMaps.Insert(v.ConfigMap.Name)
		}
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, ctr := range cs {
			for _, e := range ctr.EnvFrom {
				if e.SecretRef != nil {
					secrets.Insert(e.SecretRef.Name)
				}
				if e.ConfigMapRef != nil {
					configMaps.Insert(e.ConfigMapRef.Name)
				}
			}
			for _, e := range ctr.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					secrets.Insert(e.ValueFrom.SecretKeyRef.Name)
				}
				if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
					configMaps.Insert(e.ValueFrom.ConfigMapKeyRef.Name)
				}
			}
		}
	}
}

// credentialName matches env variable names whose literal values are redacted.
var credentialName = regexp.MustCompile(`(?i)pass|secret|token|key|cred|auth`)

// addObject adds obj as YAML with managed fields, the last-applied annotation (which holds a
// Secret's data when it was applied) and credential-like env values stripped.
func (o *ReportOptions) addObject(b *bundle, name string, obj runtime.Object) {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		b.omit(name, err)
		return
	}
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(raw)}
	u.SetManagedFields(nil)
	if a := u.GetAnnotations(); a != nil {
		delete(a, "kubectl.kubernetes.io/last-applied-configuration")
		u.SetAnnotations(a)
	}
	redactEnv(u.Object)
	o.addYAML(b, name, u.Object)
}

// redactEnv replaces, anywhere in v, the value of an env entry ({name, value}) whose name
// looks like a credential.
func redactEnv(v any) {
	switch x := v.(type) {
	case map[string]any:
		if n, ok := x["name"].(string); ok {
			if _, has := x["value"].(string); has && credentialName.MatchString(n) {
				x["value"] = "<redacted>"
			}
		}
		for _, c := range x {
			redactEnv(c)
		}
	case []any:
		for _, c := range x {
			redactEnv(c)
		}
	}
}

func (o *ReportOptions) addYAML(b *bundle, name string, v any) {
	data, err := yaml.Marshal(v)
	if err != nil {
		b.omit(name, err)
		return
	}
	b.add(name, data)
}

// collectEvents adds the namespace's Events about the cluster's objects (pods, StatefulSets,
// the Lease, the controllers' resources).
func (o *ReportOptions) collectEvents(ctx context.Context, cl *Clients, c *ops.Cluster, pods []corev1.Pod, b *bundle) {
	names := sets.New(c.Name, "dbops-"+c.Name)
	for _, g := range c.Groups {
		if g.Owner != nil {
			names.Insert(g.Owner.Ref(c.Namespace).Name)
		}
	}
	for _, p := range pods {
		names.Insert(p.Name)
	}
	list, err := cl.Kube.CoreV1().Events(c.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.omit("events.yaml", err)
		return
	}
	var out []map[string]any
	for _, e := range list.Items {
		if !names.Has(e.InvolvedObject.Name) {
			continue
		}
		out = append(out, map[string]any{"time": eventTime(e), "type": e.Type, "reason": e.Reason,
			"object": e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name, "message": e.Message, "count": e.Count,
			"source": e.Source.Component + e.ReportingController})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i]["time"].(time.Time).Before(out[j]["time"].(time.Time)) })
	o.addYAML(b, "events.yaml", out)
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.UTC()
	case !e.EventTime.IsZero():
		return e.EventTime.UTC()
	}
	return e.CreationTimestamp.UTC()
}

// logsNeed is the permission --logs reads with; the README's Role grants it. Asked only when
// --logs is given, so a Role without it still makes bundles without logs.
var logsNeed = ops.Permission{Verb: "get", Resource: "pods", Subresource: "log"}

// collectLogs adds the last LogLines lines of every container of every pod. Without `get
// pods/log` it asks for no log and leaves out logs/ naming the permission once (not one 403 per
// container), with a warning: the user asked for logs.
func (o *ReportOptions) collectLogs(ctx context.Context, cl *Clients, ns string, pods []corev1.Pod, b *bundle) {
	if ok, err := cl.access().Allowed(ctx, ns, logsNeed); err != nil || !ok {
		why := fmt.Errorf("permission missing in namespace %s: you may not %s (add it to the Role, see the README's RBAC section)", ns, logsNeed)
		if err != nil {
			why = fmt.Errorf("cannot check permission to %s: %w", logsNeed, err)
		}
		b.omit("logs/", why)
		ops.Fprintf(o.ErrOut, "warning: logs left out: %v\n", why)
		return
	}
	for _, p := range pods {
		for _, ctr := range p.Spec.Containers {
			name := "logs/" + p.Name + "/" + ctr.Name + ".log"
			lines := o.LogLines
			data, err := cl.Kube.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: ctr.Name, TailLines: &lines}).DoRaw(ctx)
			if err != nil {
				b.omit(name, err)
				continue
			}
			b.add(name, data)
		}
	}
}

// writeZipAtomically writes files into a temporary file next to path and renames it into
// place, so a reader never sees half a bundle; without force an existing path is kept (a link
// fails on it, where a rename would replace it).
func writeZipAtomically(path string, files map[string][]byte, force bool) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	zw := zip.NewWriter(tmp)
	for _, n := range names {
		w, err := zw.Create(n)
		if err != nil {
			_ = tmp.Close()
			return fmt.Errorf("writing %s: %w", path, err)
		}
		if _, err := io.Copy(w, bytes.NewReader(files[n])); err != nil {
			_ = tmp.Close()
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	if err := zw.Close(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if force {
		if err := os.Rename(tmp.Name(), path); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		return nil
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return ops.Usagef("%s exists; refusing to overwrite it (pass --force, or another -f)", path)
		}
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return os.Remove(tmp.Name())
}
