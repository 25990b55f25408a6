package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// DefaultFailureThreshold is how long a pod must be failing before
// --failed picks it (docs/procedures.md: 7200 s).
const DefaultFailureThreshold = 2 * time.Hour

// TaintRule selects pods on nodes carrying the taint Key for at least
// MinAge (by the taint's timeAdded).
type TaintRule struct {
	Key    string
	MinAge time.Duration
}

// ParseTaintRule parses KEY[=DURATION].
func ParseTaintRule(s string) (TaintRule, error) {
	key, dur, hasDur := strings.Cut(strings.TrimSpace(s), "=")
	if key == "" {
		return TaintRule{}, Usagef("--taint needs a taint key (KEY or KEY=DURATION), got %q", s)
	}
	r := TaintRule{Key: key}
	if hasDur {
		d, err := time.ParseDuration(dur)
		if err != nil || d < 0 {
			return TaintRule{}, Usagef("--taint %s: %q is not a duration like 30m or 2h", key, dur)
		}
		r.MinAge = d
	}
	return r, nil
}

// FailedOptions says which conditions make a pod a replacement candidate.
type FailedOptions struct {
	// Threshold is how long a pod must have been not Ready (or Pending).
	Threshold time.Duration
	Taints    []TaintRule
	// Now is the API server's time.
	Now time.Time
}

// Candidate is a pod chosen by FindFailed, with why.
type Candidate struct {
	Pod    string
	Reason string
}

// FindFailed returns the cluster's pods (in procedure order) that meet a
// failure condition. members may be nil (no engine view of membership).
func FindFailed(ctx context.Context, client kubernetes.Interface, c *Cluster, opts FailedOptions, members MemberChecker) ([]Candidate, error) {
	live, err := client.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	byName := map[string]*corev1.Pod{}
	for i := range live.Items {
		byName[live.Items[i].Name] = &live.Items[i]
	}
	var notMembers map[string]string
	if members != nil {
		if notMembers, err = members.NotMembers(ctx, c); err != nil {
			return nil, fmt.Errorf("checking database membership: %w", err)
		}
	}
	nodes := map[string]*corev1.Node{}
	var out []Candidate
	for _, p := range c.AllPods() {
		lp := byName[p.Name]
		if lp == nil {
			// The StatefulSet controller has yet to create it; nothing to
			// replace.
			continue
		}
		var reasons []string
		reasons = append(reasons, failingFor(lp, opts)...)
		for _, name := range p.PVCs {
			_, err := client.CoreV1().PersistentVolumeClaims(c.Namespace).Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				reasons = append(reasons, "PVC "+name+" missing")
			case err != nil:
				return nil, fmt.Errorf("reading PVC %s: %w", name, err)
			}
		}
		if why := notMembers[p.Name]; why != "" {
			reasons = append(reasons, why)
		}
		if node := lp.Spec.NodeName; node != "" && len(opts.Taints) > 0 {
			n, ok := nodes[node]
			if !ok {
				n, err = client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					return nil, fmt.Errorf("reading node %s: %w", node, err)
				}
				if err != nil {
					n = nil
				}
				nodes[node] = n
			}
			reasons = append(reasons, taintReasons(n, opts)...)
		}
		if len(reasons) > 0 {
			out = append(out, Candidate{Pod: p.Name, Reason: strings.Join(reasons, "; ")})
		}
	}
	return out, nil
}

// failingFor reports a pod Pending, or not Ready, for longer than the
// threshold. Ages come from the Ready condition's lastTransitionTime (the
// creation time while Pending), so a pod that just restarted is left alone.
func failingFor(p *corev1.Pod, opts FailedOptions) []string {
	if p.DeletionTimestamp != nil {
		return nil
	}
	since := p.CreationTimestamp.Time
	ready := false
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			ready = cond.Status == corev1.ConditionTrue
			if !cond.LastTransitionTime.IsZero() {
				since = cond.LastTransitionTime.Time
			}
		}
	}
	age := opts.Now.Sub(since)
	switch {
	case p.Status.Phase == corev1.PodPending && age >= opts.Threshold:
		return []string{fmt.Sprintf("Pending for %s", age.Round(time.Second))}
	case !ready && age >= opts.Threshold:
		return []string{fmt.Sprintf("not Ready for %s", age.Round(time.Second))}
	}
	return nil
}

func taintReasons(n *corev1.Node, opts FailedOptions) []string {
	if n == nil {
		return nil
	}
	var out []string
	for _, rule := range opts.Taints {
		i := slices.IndexFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == rule.Key })
		if i < 0 {
			continue
		}
		t := n.Spec.Taints[i]
		// A taint without timeAdded has an unknown age: only a rule
		// without a minimum age matches it.
		if t.TimeAdded == nil {
			if rule.MinAge == 0 {
				out = append(out, fmt.Sprintf("node %s has taint %s", n.Name, t.Key))
			}
			continue
		}
		if age := opts.Now.Sub(t.TimeAdded.Time); age >= rule.MinAge {
			out = append(out, fmt.Sprintf("node %s has taint %s for %s", n.Name, t.Key, age.Round(time.Second)))
		}
	}
	return out
}
