//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim"
	"github.com/kubectl-dbops/kubectl-dbops/test/sim/fdbsim/fdbwire"
	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

// ndETA is an ETA as NDJSON events and status -o json carry it (ops.ETA).
type ndETA struct {
	At      time.Time     `json:"at"`
	Low     time.Duration `json:"lowNs"`
	High    time.Duration `json:"highNs"`
	Basis   string        `json:"basis"`
	Unknown string        `json:"unknown"`
	Step    *ndETA        `json:"step"`
}

// statusETA is the ETA in `status -o json` (the journal on the Lease), read as a second
// process would.
func statusETA(t *testing.T, env []string, ns, cluster string) *ndETA {
	t.Helper()
	res := runCLI(t, env, "status", cluster, "-n", ns, "-o", "json")
	if res.Code != 0 {
		t.Fatalf("status: %s", res)
	}
	var st struct {
		Lock struct {
			Journal struct {
				ETA *ndETA `json:"eta"`
			} `json:"journal"`
		} `json:"lock"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, res.Stdout)
	}
	return st.Lock.Journal.ETA
}

// podStartTimes gives pod <name>-<i> of the StatefulSet delays[i] to start (kwok).
func podStartTimes(name string, delays ...string) func(*appsv1.StatefulSet) {
	return func(s *appsv1.StatefulSet) {
		if s.Spec.Template.Annotations == nil {
			s.Spec.Template.Annotations = map[string]string{}
		}
		for i, d := range delays {
			s.Spec.Template.Annotations[testbed.PodStartDelayAnnotationFor(fmt.Sprintf("%s-%d", name, i))] = d
		}
	}
}

// TestETAHonestAtHalfWay measures the error of the run's ETA (#41 item 3): a rolling restart
// of six pods that take different times to start (1 s to 4 s; the second half's pods not in
// the order, nor with the median, of the first's), read from `status -o json` in a second
// process once half the steps are done. The time the run actually took from that estimate
// to its end falls within the range the estimate showed.
func TestETAHonestAtHalfWay(t *testing.T) {
	ns := newNamespace(t)
	const name = "eta"
	createDBCluster(t, ns, name, 6, podStartTimes(name, "1s", "4s", "2s", "4s", "2s", "4s"))
	env := cliEnv(t)
	run := startCLI(t, env, "restart", name, "-n", ns, "--rolling", "--yes", "-o", "json", "--lock-id", "e2e-eta")
	run.waitEvent("half the steps done", func(ev ndEvent) bool {
		return ev.Type == "step-done" && ev.Step != nil && ev.Step.Index == 3 && ev.Step.Total == 6
	})
	// The journal is written before the step-done event goes out: status now shows the
	// estimate made at the end of step 3 or at the start of step 4 (the same steps left).
	res := runCLI(t, env, "status", name, "-n", ns, "-o", "json")
	if res.Code != 0 {
		t.Fatalf("status: %s", res)
	}
	var st struct {
		Lock struct {
			Journal struct {
				Done []string `json:"done"`
				ETA  *ndETA   `json:"eta"`
			} `json:"journal"`
		} `json:"lock"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, res.Stdout)
	}
	eta := st.Lock.Journal.ETA
	if eta == nil || eta.Unknown != "" || eta.At.IsZero() || eta.High <= 0 {
		t.Fatalf("status at half-way shows no ETA range: %+v\n%s", eta, res.Stdout)
	}
	if !strings.HasPrefix(eta.Basis, "3 restart step(s) left") {
		t.Fatalf("status did not show the half-way estimate (3 steps left): %+v", eta)
	}
	final := run.waitEvent("the end of the run", func(ev ndEvent) bool { return ev.Type == "done" })
	if r := run.wait(); r.Code != 0 || final.Outcome != "succeeded" {
		t.Fatalf("restart: exit %d outcome %s\n%s", r.Code, final.Outcome, r)
	}
	actual := final.Time.Sub(eta.At)
	t.Logf("ETA at half-way %s–%s (%s); the run ended %s later", eta.Low, eta.High, eta.Basis, actual)
	if actual < eta.Low || actual > eta.High {
		t.Errorf("the run ended %s after the half-way estimate, outside its range %s–%s (%s)", actual, eta.Low, eta.High, eta.Basis)
	}
}

// TestFDBExclusionETAFromDataRate (#41 item 3, byte rates): a FoundationDB replace whose
// excluded storage process takes a while to drain (the simulator moves its data in 20s). Its
// exclude step's waiting events (NDJSON) carry the step's ETA from the rate the bytes left
// fall at: unknown at the first reading, then a range; `status -o json` run as a second
// process on each such event shows it from the journal on the Lease; the step ends within the
// range of its ETA (before the high end counted the reading that sees the data gone, it
// ended just past it: 15.2s after a 4.3s–14.6s, 15.9s after a 15.5s–15.7s).
func TestFDBExclusionETAFromDataRate(t *testing.T) {
	ns := newNamespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	b, err := fdbwire.Start(ctx, bed, bed.Client, bed.Dynamic, ns, fdbsim.Config{RestartDelay: time.Second, DataMove: 20 * time.Second}, fdbE2EPacing())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.Create(ctx, fdbwire.ClusterSpec{Namespace: ns, Name: "myfdb", Storage: 3, Log: 3, Stateless: 3, RedundancyMode: "triple",
		ZoneFromNodeLabel: true, WaitBetweenRemovalsSeconds: fdbE2EWaitBetweenRemovals()}); err != nil {
		t.Fatal(err)
	}
	env := cliEnv(t)
	pods, err := bed.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "foundationdb.org/fdb-process-class=storage"})
	if err != nil || len(pods.Items) != 3 {
		t.Fatalf("storage pods: %v", err)
	}
	run := startCLI(t, env, "replace", "myfdb", pods.Items[0].Name, "-n", ns, "--yes", "-o", "json", "--lock-duration", "15s")
	var unknown, ranged *ndETA
	var fromStatus *ndETA
	for fromStatus == nil {
		ev := run.waitEvent("a waiting event of the exclusion with a ranged ETA shown by status", func(ev ndEvent) bool {
			return ev.Type == "step-waiting" && strings.HasPrefix(ev.stepID(), "exclude/")
		})
		if ev.ETA == nil || ev.ETA.Step == nil {
			// Before the operator excludes, no data moves: no rate to read.
			if strings.Contains(ev.Reason, "left to move") {
				t.Fatalf("the exclusion's waiting event on data to move carries no step ETA: %+v", ev)
			}
			continue
		}
		if ev.ETA.Step.Unknown != "" {
			if unknown == nil {
				unknown = ev.ETA.Step
			}
			continue
		}
		ranged = ev.ETA.Step
		if ranged.High <= 0 || ranged.Low > ranged.High || !strings.Contains(ranged.Basis, "/s over ") {
			t.Fatalf("the step's ETA is not a range from a rate: %+v", ranged)
		}
		// The journal goes out at most every few seconds: the next waiting event asks again.
		if eta := statusETA(t, env, ns, "myfdb"); eta != nil && eta.Step != nil && eta.Step.Unknown == "" {
			fromStatus = eta
		}
	}
	if unknown == nil || !strings.Contains(unknown.Unknown, "one reading so far") {
		t.Errorf("the first reading's step ETA was not unknown for want of a second: %+v", unknown)
	}
	// The run's own range needs the later steps' kinds timed too (one batch: unknown, "the
	// steps after this one: ..."); the step's part stands on its own.
	if fromStatus.Step.High <= 0 || !strings.Contains(fromStatus.Step.Basis, "left at ") ||
		!strings.Contains(fromStatus.Basis+fromStatus.Unknown, "this step: ") && !strings.HasPrefix(fromStatus.Unknown, "the steps after this one: ") {
		t.Errorf("status shows the ETA %+v (step %+v)", fromStatus, fromStatus.Step)
	}
	t.Logf("NDJSON step ETA %s–%s (%s); status: run %s–%s (%s%s), step %s–%s (%s)", ranged.Low, ranged.High, ranged.Basis,
		fromStatus.Low, fromStatus.High, fromStatus.Basis, fromStatus.Unknown, fromStatus.Step.Low, fromStatus.Step.High, fromStatus.Step.Basis)
	// Honest: the step ends within the range its last ETA before status showed it gave.
	done := run.waitEvent("the exclusion done", func(ev ndEvent) bool { return ev.Type == "step-done" && strings.HasPrefix(ev.stepID(), "exclude/") })
	if took := done.Time.Sub(ranged.At); took < ranged.Low || took > ranged.High {
		t.Errorf("the exclude step ended %s after its ETA %s–%s (%s)", took, ranged.Low, ranged.High, ranged.Basis)
	} else {
		t.Logf("the exclude step ended %s after its ETA %s–%s", took, ranged.Low, ranged.High)
	}
	if res := run.wait(); res.Code != 0 {
		t.Fatalf("replace: %s", res)
	}
}
