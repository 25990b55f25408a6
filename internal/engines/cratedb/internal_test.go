package cratedb

import (
	"context"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

func TestReplicaCount(t *testing.T) {
	tests := []struct {
		in      string
		n       int
		bounded bool
		err     bool
	}{
		{"1", 1, true, false},
		{"0-1", 0, true, false},
		{"2-all", 2, true, false},
		{"all", 0, false, false},
		{"x", 0, false, true},
		{"-1", 0, false, true},
	}
	for _, tt := range tests {
		n, b, err := replicaCount(tt.in)
		if n != tt.n || b != tt.bounded || (err != nil) != tt.err {
			t.Errorf("replicaCount(%q) = %d, %v, %v", tt.in, n, b, err)
		}
	}
}

func TestRewriteGateway(t *testing.T) {
	v := func(s string) version { x, _ := parseVersion(s); return x }
	tests := []struct {
		name, in, want string
		ver            version
	}{
		{"nodes, version unknown", "-Cgateway.expected_nodes=3", "-Cgateway.expected_nodes=7", version{}},
		{"data nodes, version unknown", "-Cgateway.expected_data_nodes=3", "-Cgateway.expected_data_nodes=4", version{}},
		{"recover-after is the quorum", "-Cgateway.recover_after_data_nodes=3", "-Cgateway.recover_after_data_nodes=3", version{}},
		{"recover-after nodes", "-Cgateway.recover_after_nodes=5", "-Cgateway.recover_after_nodes=4", version{}},
		{"shell line", "crate -Cgateway.expected_nodes=3 -Cgateway.recover_after_nodes=2 -Cnode.name=x",
			"crate -Cgateway.expected_nodes=7 -Cgateway.recover_after_nodes=4 -Cnode.name=x", v("4.6.8")},
		{"4.7+ uses the data node settings", "-Cgateway.expected_nodes=3 -Cgateway.recover_after_nodes=2",
			"-Cgateway.expected_data_nodes=4 -Cgateway.recover_after_data_nodes=3", v("5.10.1")},
		{"before 4.7 the node settings", "-Cgateway.expected_data_nodes=3", "-Cgateway.expected_nodes=7", v("4.6.0")},
		{"other settings untouched", "-Cgateway.recover_after_time=5m", "-Cgateway.recover_after_time=5m", v("5.10.1")},
	}
	for _, tt := range tests {
		if got := rewriteGateway(tt.in, gatewayTarget{Total: 7, Data: 4, Version: tt.ver}, nil); got != tt.want {
			t.Errorf("%s: rewriteGateway(%q) = %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
}

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in          string
		ok          bool
		noLicense   bool
		dataGateway bool
	}{
		{"5.2.11", true, false, true},
		{"5.3.0", true, true, true},
		{"5.10.1-SNAPSHOT", true, true, true},
		{"4.6.8", true, false, false},
		{"4.7.0", true, false, true},
		{"x", false, false, false},
	}
	for _, tt := range tests {
		v, ok := parseVersion(tt.in)
		if ok != tt.ok || (ok && (v.atLeast(5, 3) != tt.noLicense || v.atLeast(4, 7) != tt.dataGateway)) {
			t.Errorf("parseVersion(%q) = %+v, %v", tt.in, v, ok)
		}
	}
	low, err := clusterVersion([]nodeRow{{Version: "5.10.1"}, {Version: "5.2.3"}, {Version: ""}})
	if err != nil || low.raw != "5.2.3" {
		t.Errorf("clusterVersion = %v, %v; want the oldest, 5.2.3", low, err)
	}
}

func TestRedactAndQuote(t *testing.T) {
	pw := "it's-secret"
	stmt := crashCreateUser("sys\"x", pw)
	if stmt != `CREATE USER "sys""x" WITH (password = 'it''s-secret');` {
		t.Errorf("statement %s", stmt)
	}
	for _, s := range []string{stmt, "error near " + pw, "echo it''s-secret"} {
		if got := redact(s, pw); strings.Contains(got, "secret") {
			t.Errorf("redact(%q) = %q", s, got)
		}
	}
}

func TestCandidatePods(t *testing.T) {
	c := &ops.Cluster{Groups: []*ops.NodeGroup{
		{Name: "hot", Role: ops.RoleData, MasterEligible: true, Pods: []ops.Pod{{Name: "hot-0"}, {Name: "hot-1"}}},
		{Name: "cold", Role: ops.RoleData, Pods: []ops.Pod{{Name: "cold-0"}}},
	}}
	if got := candidatePods(c, []string{"hot-0"}); !slices.Equal(got, []string{"hot-1", "cold-0"}) {
		t.Errorf("candidates %v", got)
	}
}

func TestTLSConfig(t *testing.T) {
	c := &ops.Cluster{Name: "db", Namespace: "prod"}
	client := fake.NewClientset()
	for _, mode := range []string{"", "disable"} {
		if cfg, err := (&PGConnector{Client: client, SSLMode: mode}).tlsConfig(context.Background(), c); err != nil || cfg != nil {
			t.Errorf("%q: %v %v", mode, cfg, err)
		}
	}
	cfg, err := (&PGConnector{Client: client, SSLMode: "require"}).tlsConfig(context.Background(), c)
	if err != nil || cfg == nil || !cfg.InsecureSkipVerify {
		t.Errorf("require: %v %v", cfg, err)
	}
	_, err = (&PGConnector{Client: client, SSLMode: "verify-full", CA: SecretRef{Name: "ca", Key: "ca.crt"}}).tlsConfig(context.Background(), c)
	if ops.ExitCode(err) != ops.ExitUsage || !strings.Contains(err.Error(), "Secret prod/ca not found") {
		t.Errorf("missing CA secret: %v", err)
	}
}

func TestMatchPods(t *testing.T) {
	podEnv := []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	pod := func(name, ip string, c corev1.Container) *corev1.Pod {
		c.Name = "crate"
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod"},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{c}},
			Status: corev1.PodStatus{PodIP: ip}}
	}
	k8sArgs := corev1.Container{Args: []string{"-Cnode.name=$(POD_NAME)"}, Env: podEnv}
	guideArgs := corev1.Container{Args: []string{"-Cnode.name=${POD_NAME}"}, Env: podEnv}
	operatorCmd := corev1.Container{Command: []string{"/bin/sh", "-c", "/docker-entrypoint.sh crate -Cnode.name=data-hot-$(hostname | rev | cut -d- -f1 | rev) -Cgateway.expected_data_nodes=3"}}
	literal := func(n string) corev1.Container { return corev1.Container{Args: []string{"-Cnode.name=" + n}} }
	row := func(name, host, ip string) nodeRow {
		return nodeRow{ID: "id-" + name, Name: name, Hostname: host, RestHost: ip}
	}
	tests := []struct {
		name    string
		pods    []*corev1.Pod
		rows    []nodeRow
		want    map[string]string // pod -> node ("" = no node)
		problem string            // substring of some pod's problem
	}{
		{"pod-name layout, $(POD_NAME)", []*corev1.Pod{pod("crate-0", "10.0.0.1", k8sArgs), pod("crate-1", "10.0.0.2", k8sArgs)},
			[]nodeRow{row("crate-1", "crate-1", "10.0.0.2"), row("crate-0", "crate-0", "10.0.0.1")},
			map[string]string{"crate-0": "crate-0", "crate-1": "crate-1"}, ""},
		{"official guide, ${POD_NAME}", []*corev1.Pod{pod("crate-0", "", guideArgs)},
			[]nodeRow{row("crate-0", "crate-0.crate-set.prod.svc", "")}, map[string]string{"crate-0": "crate-0"}, ""},
		{"operator layout: shell-computed name, found by hostname and IP", []*corev1.Pod{pod("crate-data-hot-db-1", "10.0.0.7", operatorCmd)},
			[]nodeRow{row("data-hot-0", "crate-data-hot-db-0", "10.0.0.6"), row("data-hot-1", "crate-data-hot-db-1", "10.0.0.7")},
			map[string]string{"crate-data-hot-db-1": "data-hot-1"}, ""},
		{"escaped $$ is literal", []*corev1.Pod{pod("p-0", "", corev1.Container{Args: []string{"-Cnode.name=a$$(POD_NAME)"}, Env: podEnv})},
			[]nodeRow{row("a$(POD_NAME)", "p-0", "")}, map[string]string{"p-0": "a$(POD_NAME)"}, ""},
		{"not in sys.nodes: the argument's name, no row", []*corev1.Pod{pod("crate-2", "10.0.0.3", k8sArgs)},
			[]nodeRow{row("crate-0", "crate-0", "10.0.0.1")}, map[string]string{"crate-2": ""}, ""},
		{"argument names another node than the hostname's", []*corev1.Pod{pod("crate-0", "", literal("n1"))},
			[]nodeRow{row("n0", "crate-0", ""), row("n1", "elsewhere", "")}, map[string]string{"crate-0": ""}, "matches several CrateDB nodes: n0, n1"},
		{"argument disagrees with the only match", []*corev1.Pod{pod("crate-0", "", literal("n9"))},
			[]nodeRow{row("n0", "crate-0", "")}, map[string]string{"crate-0": ""}, "its -Cnode.name is n9 but the node with its hostname/IP is named n0"},
		{"IP disagrees", []*corev1.Pod{pod("crate-0", "10.0.0.1", k8sArgs)},
			[]nodeRow{row("crate-0", "crate-0", "10.0.0.9")}, map[string]string{"crate-0": ""}, "has address 10.0.0.9"},
		{"two pods, one node", []*corev1.Pod{pod("a-0", "", literal("n0")), pod("b-0", "", literal("n0"))},
			[]nodeRow{row("n0", "", "")}, map[string]string{"a-0": "", "b-0": ""}, "pods a-0, b-0 all match CrateDB node n0"},
		{"unknown variable: only hostname/IP count", []*corev1.Pod{pod("c-0", "10.0.0.1", corev1.Container{Args: []string{"-Cnode.name=$(NODE_ID)"}})},
			[]nodeRow{row("$(NODE_ID)", "c-0", "10.0.0.1")}, map[string]string{"c-0": "$(NODE_ID)"}, ""},
		{"host network: only the name counts", []*corev1.Pod{func() *corev1.Pod {
			p := pod("h-0", "192.168.0.1", literal("h0"))
			p.Spec.HostNetwork = true
			return p
		}()}, []nodeRow{row("h0", "worker-1", "192.168.0.1")}, map[string]string{"h-0": "h0"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := map[string]*corev1.Pod{}
			var names []string
			for _, p := range tt.pods {
				live[p.Name] = p
				names = append(names, p.Name)
			}
			m := buildNodeMap(names, live, tt.rows)
			var problems []string
			for pod, want := range tt.want {
				pn := m.pods[pod]
				got := ""
				if pn.Row != nil {
					got = pn.Row.Name
				}
				if got != want {
					t.Errorf("pod %s -> node %q, want %q (problem %q)", pod, got, want, pn.Problem)
				}
				problems = append(problems, pn.Problem)
			}
			all := strings.Join(problems, "|")
			if (tt.problem == "") != (strings.Trim(all, "|") == "") || !strings.Contains(all, tt.problem) {
				t.Errorf("problems %q, want %q", all, tt.problem)
			}
		})
	}
}

func TestExpandEnv(t *testing.T) {
	env := map[string]string{"A": "x", "B": "y"}
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"n-$(A)", "n-x", true},
		{"${A}-${B}", "x-y", true},
		{"$$(A)", "$(A)", true},
		{"$(C)", "$(C)", false},
		{"$A", "$A", false},
		{"m-$(hostname | rev)", "m-$(hostname | rev)", false},
		{"plain", "plain", true},
	}
	for _, tt := range tests {
		got, ok := expandEnv(tt.in, env)
		if got != tt.want || ok != tt.ok {
			t.Errorf("expandEnv(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestSpecOf(t *testing.T) {
	group := func(c corev1.Container) *ops.NodeGroup {
		c.Name = "crate"
		s := &appsv1.StatefulSet{}
		s.Spec.Template.Spec.Containers = []corev1.Container{c}
		return &ops.NodeGroup{Owner: ops.NewStatefulSetOwner(s)}
	}
	hba := []string{"-Cauth.host_based.enabled=true", "-Cauth.host_based.config.0.user=crate", "-Cauth.host_based.config.0.address=_local_",
		"-Cauth.host_based.config.0.method=trust", "-Cauth.host_based.config.99.method=password"}
	tests := []struct {
		name string
		c    corev1.Container
		want crateSpec
		argv string // crash argv, "" = refused
	}{
		{"defaults", corev1.Container{Args: []string{"crate"}}, crateSpec{HTTPPort: 4200, PGPort: 5432},
			"crash --verify-ssl=false --host http://localhost:4200"},
		{"TLS and named ports, operator command", corev1.Container{
			Command: append([]string{"/docker-entrypoint.sh", "crate", "-Cssl.http.enabled=true", "-Cssl.psql.enabled=true"}, hba...),
			Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: 4201}, {Name: "postgres", ContainerPort: 5433}}},
			crateSpec{HTTPPort: 4201, PGPort: 5433, HTTPSSL: true, PGSSL: true, HBA: true, HasTrust: true, TrustUser: "crate"},
			"crash --verify-ssl=false --host https://localhost:4201 --username crate"},
		{"port settings win, inside a shell line", corev1.Container{Command: []string{"sh", "-c", "exec crate -Chttp.port=4300 -Cpsql.port=6432"},
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 4200}}}, crateSpec{HTTPPort: 4300, PGPort: 6432},
			"crash --verify-ssl=false --host http://localhost:4300"},
		{"host-based auth without trust", corev1.Container{Args: []string{"-Cauth.host_based.enabled=true", "-Cauth.host_based.config.99.method=password"}},
			crateSpec{HTTPPort: 4200, PGPort: 5432, HBA: true}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := specOf(group(tt.c))
			if got != tt.want {
				t.Errorf("specOf = %+v, want %+v", got, tt.want)
			}
			e := &Engine{}
			user, err := e.crashUser(got)
			if tt.argv == "" {
				if ops.ExitCode(err) != ops.ExitUsage || !strings.Contains(err.Error(), "--crash-user") {
					t.Errorf("no trust entry: %v, want a usage error naming --crash-user", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if argv := strings.Join(e.crashBase(got, user), " "); argv != tt.argv {
				t.Errorf("crash argv %q, want %q", argv, tt.argv)
			}
		})
	}
}

// TestSetGatewayArgsEachSettingOnce: from 4.7 expected_nodes becomes expected_data_nodes; a
// template that has both must end with the setting once, because CrateDB exits at start-up
// on a -C setting given twice (server/cli/EnvironmentAwareCommand.java). Before, the rewrite
// left -Cgateway.expected_data_nodes twice and the next restarted pod crash-looped.
func TestSetGatewayArgsEachSettingOnce(t *testing.T) {
	v := func(s string) version { x, _ := parseVersion(s); return x }
	tests := []struct {
		name          string
		command, args []string
		ver           version
		wantCmd       []string
		wantArgs      []string
	}{{
		name:     "both in args, 5.10",
		command:  []string{"/docker-entrypoint.sh", "crate"},
		args:     []string{"-Cgateway.expected_nodes=9", "-Cgateway.expected_data_nodes=6", "-Cgateway.recover_after_nodes=5", "-Cgateway.recover_after_data_nodes=4", "-Cnode.name=x"},
		ver:      v("5.10.1"),
		wantCmd:  []string{"/docker-entrypoint.sh", "crate"},
		wantArgs: []string{"-Cgateway.expected_data_nodes=4", "-Cgateway.recover_after_data_nodes=3", "-Cnode.name=x"},
	}, {
		name:     "one in command, one in args",
		command:  []string{"/docker-entrypoint.sh", "crate", "-Cgateway.expected_nodes=7"},
		args:     []string{"-Cgateway.expected_data_nodes=4"},
		ver:      v("5.10.1"),
		wantCmd:  []string{"/docker-entrypoint.sh", "crate", "-Cgateway.expected_data_nodes=4"},
		wantArgs: []string{},
	}, {
		name:    "shell line",
		command: []string{"/bin/sh", "-c", "/docker-entrypoint.sh crate -Cgateway.expected_nodes=7 -Cgateway.expected_data_nodes=4 -Cnode.name=x"},
		ver:     v("5.10.1"),
		wantCmd: []string{"/bin/sh", "-c", "/docker-entrypoint.sh crate -Cgateway.expected_data_nodes=4 -Cnode.name=x"},
	}, {
		name:     "before 4.7 both become expected_nodes",
		args:     []string{"-Cgateway.expected_data_nodes=4", "-Cgateway.expected_nodes=7"},
		ver:      v("4.6.8"),
		wantArgs: []string{"-Cgateway.expected_nodes=7"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "crate", Command: slices.Clone(tt.command), Args: slices.Clone(tt.args)}}}}}}
			if !setGatewayArgs(s, gatewayTarget{Total: 7, Data: 4, Version: tt.ver}) {
				t.Fatal("no change reported")
			}
			c := s.Spec.Template.Spec.Containers[0]
			if !slices.Equal(c.Command, tt.wantCmd) || !slices.Equal(c.Args, tt.wantArgs) {
				t.Fatalf("command %q args %q, want %q %q", c.Command, c.Args, tt.wantCmd, tt.wantArgs)
			}
			// Every -C key once, over command and args, also inside shell lines.
			seen := map[string]int{}
			for _, a := range append(slices.Clone(c.Command), c.Args...) {
				for _, w := range strings.Fields(a) {
					if strings.HasPrefix(w, "-C") {
						seen[gatewayKey(w)]++
					}
				}
			}
			for k, n := range seen {
				if n > 1 {
					t.Errorf("setting %s given %d times: %q %q", k, n, c.Command, c.Args)
				}
			}
			// A second rewrite changes nothing.
			if setGatewayArgs(s, gatewayTarget{Total: 7, Data: 4, Version: tt.ver}) {
				t.Errorf("second rewrite reported a change")
			}
		})
	}
}

// TestPlanStepRefusesAnUnrecognisablePod: a pod with no CrateDB node and nothing to
// recognise it by when it comes back (no node name, hostname or IP) is refused while
// planning (exit 2), before the plan has any step to run.
func TestPlanStepRefusesAnUnrecognisablePod(t *testing.T) {
	c := &ops.Cluster{Name: "db", Namespace: "prod", Groups: []*ops.NodeGroup{{Name: "hot", Pods: []ops.Pod{{Name: "db-hot-0"}, {Name: "db-hot-1"}}}}}
	g := &restartGate{c: c, mode: ops.ModePod, nodes: &nodeMap{pods: map[string]*podNode{
		"db-hot-0": {},
		"db-hot-1": {Name: "data-hot-1", Facts: podFacts{Pod: "db-hot-1", Hostname: "db-hot-1"}},
	}}}
	for _, tt := range []struct{ pod, want string }{
		{"db-hot-0", "refusing: pod db-hot-0 has no CrateDB node in sys.nodes and nothing to recognise it by"},
		{"db-hot-1", ""},
	} {
		err := g.PlanStep(&ops.Step{ID: "pod/" + tt.pod}, []ops.Pod{{Name: tt.pod}})
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.pod, err)
			}
			continue
		}
		if ops.ExitCode(err) != ops.ExitUsage || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want exit 2 with %q", tt.pod, err, tt.want)
		}
	}
}
