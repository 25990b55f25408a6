//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

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
				ETA  *struct {
					At      time.Time     `json:"at"`
					Low     time.Duration `json:"lowNs"`
					High    time.Duration `json:"highNs"`
					Basis   string        `json:"basis"`
					Unknown string        `json:"unknown"`
				} `json:"eta"`
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
