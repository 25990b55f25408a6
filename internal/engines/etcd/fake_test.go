package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dbops/kubectl-dbops/internal/fakecluster"
	"github.com/kubectl-dbops/kubectl-dbops/internal/golden"
	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

func assertGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Assert(t, name, got)
}

// fakeMember is one member of the scripted etcd.
type fakeMember struct {
	id      uint64
	name    string
	peer    string
	client  string
	learner bool
	healthy bool
	index   uint64
}

// fakeEtcd answers etcdctl as a cluster with the given members would, in
// etcdctl's JSON shapes (decimal IDs). No processes run.
type fakeEtcd struct {
	mu       sync.Mutex
	members  []*fakeMember
	leader   uint64
	nextID   uint64
	calls    []string // "pod: subcommand args"
	notReady int      // member promote answers "not in sync" this many times
	// catchUp is how many raft entries a started learner gains per endpoint
	// status call (0: it is level with the leader at once).
	catchUp uint64
	// promotedAt records each promoted learner's raft index at promotion.
	promotedAt map[string]uint64
	// rootPassword, when set, is an enabled auth store's root password:
	// as etcd does, member list answers without credentials, everything
	// else needs root.
	rootPassword string
	// users are the auth store's other users (name -> password): they authenticate, and
	// etcd answers what needs the root role (user list, membership changes) with
	// "permission denied" (server/etcdserver/api/v3rpc: the auth store's IsAdminPermitted).
	users map[string]string
	// linearizable: member list needs quorum, as etcdctl's does from etcd 3.5 on
	// (client/v3/cluster.go, MemberList: Linearizable true); a member without
	// quorum times out instead of answering from its own view.
	linearizable bool
	// execs records every command line and its stdin.
	execs []fakeExec
	// noStty: the image has no stty, so etcdctl's password prompt fails.
	noStty bool
	// memberOfPod names the member a pod runs when it is not named after the pod.
	memberOfPod map[string]string
	// lagReads makes the named member report a raft index far behind the leader's in that
	// many of the endpoint status answers that include it (a restarted member catching up).
	lagReads map[string]int
}

type fakeExec struct {
	argv  []string
	stdin string
}

// newFakeEtcd returns n healthy started voters etcd-0..n-1 with peer URLs
// http://127.0.3.<o+1>:2380; the leader is etcd-<leader>.
func newFakeEtcd(n, leader int) *fakeEtcd {
	f := &fakeEtcd{nextID: 0x1000}
	for o := range n {
		f.members = append(f.members, &fakeMember{id: uint64(0xa0 + o), name: fmt.Sprintf("etcd-%d", o),
			peer: fmt.Sprintf("http://127.0.3.%d:2380", o+1), client: fmt.Sprintf("http://127.0.3.%d:2379", o+1), healthy: true, index: 100})
	}
	f.leader = uint64(0xa0 + leader)
	return f
}

func (f *fakeEtcd) member(pod string) *fakeMember {
	name := pod
	if n, ok := f.memberOfPod[pod]; ok {
		name = n
	}
	for _, m := range f.members {
		if m.name == name {
			return m
		}
	}
	return nil
}

func (f *fakeEtcd) mutations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if strings.Contains(c, "member add") || strings.Contains(c, "member remove") || strings.Contains(c, "member promote") || strings.Contains(c, "move-leader") {
			out = append(out, c)
		}
	}
	return out
}

func exitErr(pod, msg string) error {
	return &kube.ExitError{Pod: pod, Code: 1, Stderr: []byte(`{"level":"warn","msg":"retrying"}` + "\nError: " + msg + "\n")}
}

// Exec implements kube.Executor.
func (f *fakeEtcd) Exec(_ context.Context, _, pod, _ string, argv []string, in io.Reader) ([]byte, []byte, error) {
	var stdin []byte
	if in != nil {
		stdin, _ = io.ReadAll(in)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execs = append(f.execs, fakeExec{argv: slices.Clone(argv), stdin: string(stdin)})
	if len(argv) == 0 || argv[0] != "etcdctl" {
		return nil, nil, &kube.ExitError{Pod: pod, Code: 127, Stderr: []byte("exec: not found")}
	}
	var words []string
	for _, a := range argv[1:] {
		if !strings.HasPrefix(a, "-") {
			words = append(words, a)
		}
	}
	f.calls = append(f.calls, pod+": "+strings.Join(words, " "))
	self := f.member(pod)
	if self == nil || !self.healthy {
		return nil, []byte("Error: context deadline exceeded"), exitErr(pod, "context deadline exceeded")
	}
	if len(words) < 2 {
		return nil, nil, exitErr(pod, "unknown command")
	}
	// Authentication, as etcdctl and etcd do it: --user without a password
	// prompts and reads one line from stdin.
	prompt := []byte{}
	authed := false
	if user := flagValue(argv, "--user"); user != "" {
		if strings.Contains(user, ":") {
			return nil, nil, exitErr(pod, "fake: password given as an argument")
		}
		if f.noStty {
			return []byte(etcdctlPrompt + " \n"), nil, exitErr(pod, "stty binary not found:\n\texec: \"stty\": executable file not found in $PATH")
		}
		prompt = []byte(etcdctlPrompt + " \n")
		line, _, _ := strings.Cut(string(stdin), "\n")
		pw := strings.TrimSpace(line)
		switch {
		case f.rootPassword == "":
			return nil, nil, exitErr(pod, "etcdserver: authentication is not enabled")
		case user == "root" && pw == f.rootPassword:
		case user != "root" && f.users[user] != "" && pw == f.users[user]:
			admin := words[0] == "user" || words[0] == "move-leader" ||
				(words[0] == "member" && (words[1] == "add" || words[1] == "remove" || words[1] == "promote"))
			if admin {
				return prompt, nil, exitErr(pod, "etcdserver: permission denied")
			}
		default:
			return nil, nil, exitErr(pod, "etcdserver: authentication failed, invalid user ID or password")
		}
		authed = true
	}
	// Real etcd 3.6 with auth enabled: member list answers anyone; endpoint
	// status and health fail with "user name is empty" like the rest.
	open := words[0] == "member" && words[1] == "list"
	if f.rootPassword != "" && !authed && !open {
		return nil, nil, exitErr(pod, "etcdserver: user name is empty")
	}
	if authed && words[0] == "endpoint" {
		if slices.Contains(argv, "--cluster") {
			for _, m := range f.members {
				if m.learner && m.name != "" && m.healthy {
					return prompt, nil, exitErr(pod, "etcdserver: rpc not supported for learner")
				}
			}
		}
	}
	out, serr, err := f.answer(pod, self, argv, words)
	return append(prompt, out...), serr, err
}

// asked reports whether an endpoint command reaches m: all members with
// --cluster, else those named by --endpoints (the pod's own by default).
func asked(argv []string, m *fakeMember) bool {
	if slices.Contains(argv, "--cluster") {
		return true
	}
	eps := flagValue(argv, "--endpoints")
	return eps == "" || slices.Contains(strings.Split(eps, ","), m.client)
}

func (f *fakeEtcd) answer(pod string, self *fakeMember, argv, words []string) ([]byte, []byte, error) {
	switch words[0] + " " + words[1] {
	case "auth status":
		return []byte(fmt.Sprintf(`{"header":{},"enabled":%t,"authRevision":1}`, f.rootPassword != "")), nil, nil
	case "user list":
		return []byte(`{"header":{},"users":["root"]}`), nil, nil
	}
	if words[0] == "move-leader" {
		// etcdctl move-leader needs the leader among its endpoints (here: the pod's own member).
		if self.id != f.leader {
			return nil, nil, exitErr(pod, "no leader endpoint given at [127.0.0.1:2379]")
		}
		id, _ := strconv.ParseUint(words[1], 16, 64)
		for _, m := range f.members {
			if m.id == id && !m.learner && m.healthy {
				f.leader = id
				return []byte("Leadership transferred"), nil, nil
			}
		}
		return nil, nil, exitErr(pod, "etcdserver: bad leader transferee")
	}
	switch words[0] + " " + words[1] {
	case "member list":
		if self.learner {
			return nil, nil, exitErr(pod, "etcdserver: rpc not supported for learner")
		}
		if f.linearizable {
			voters, healthy := 0, 0
			for _, m := range f.members {
				if !m.learner {
					voters++
					if m.healthy {
						healthy++
					}
				}
			}
			if healthy < voters/2+1 {
				return nil, nil, exitErr(pod, "context deadline exceeded")
			}
		}
		return f.memberList(), nil, nil
	case "endpoint status":
		var leaderIndex uint64
		for _, m := range f.members {
			if m.id == f.leader {
				leaderIndex = m.index
			}
		}
		for _, m := range f.members {
			if m.learner && m.name != "" && m.healthy && m.index < leaderIndex {
				if f.catchUp == 0 {
					m.index = leaderIndex
				} else {
					m.index = min(m.index+f.catchUp, leaderIndex)
				}
			}
		}
		var out []ctlEndpointStatus
		for _, m := range f.members {
			if !m.healthy || m.name == "" || !asked(argv, m) {
				continue
			}
			var es ctlEndpointStatus
			es.Endpoint = m.client
			es.Status.Header.MemberID = m.id
			es.Status.Leader = f.leader
			es.Status.RaftIndex, es.Status.RaftTerm = m.index, 2
			if f.lagReads[m.name] > 0 && m.id != f.leader {
				f.lagReads[m.name]--
				es.Status.RaftIndex = 0
			}
			es.Status.IsLearner = m.learner
			out = append(out, es)
		}
		b, _ := json.Marshal(out)
		n := 0
		for _, m := range f.members {
			if asked(argv, m) {
				n++
			}
		}
		if len(out) < n {
			return b, nil, exitErr(pod, "unhealthy endpoints")
		}
		return b, nil, nil
	case "endpoint health":
		var out []ctlEndpointHealth
		failed := false
		for _, m := range f.members {
			if m.name == "" || !asked(argv, m) {
				continue
			}
			h := ctlEndpointHealth{Endpoint: m.client, Health: m.healthy && !m.learner}
			if !h.Health {
				h.Error = "context deadline exceeded"
				failed = true
			}
			out = append(out, h)
		}
		b, _ := json.Marshal(out)
		if failed {
			return b, nil, exitErr(pod, "unhealthy cluster")
		}
		return b, nil, nil
	case "member add":
		url := flagValue(argv, "--peer-urls")
		for _, m := range f.members {
			if m.peer == url {
				return nil, nil, exitErr(pod, "etcdserver: Peer URLs already exists")
			}
		}
		f.nextID++
		m := &fakeMember{id: f.nextID, peer: url, learner: true}
		f.members = append(f.members, m)
		b, _ := json.Marshal(ctlMemberAdd{Member: ctlMember{ID: m.id, PeerURLs: []string{url}, IsLearner: true}})
		return b, nil, nil
	case "member promote":
		if f.notReady > 0 {
			f.notReady--
			return nil, nil, exitErr(pod, "etcdserver: can only promote a learner member which is in sync with leader")
		}
		id, _ := strconv.ParseUint(words[2], 16, 64)
		for _, m := range f.members {
			if m.id == id {
				m.learner = false
				if f.promotedAt == nil {
					f.promotedAt = map[string]uint64{}
				}
				f.promotedAt[m.name] = m.index
				return []byte("promoted"), nil, nil
			}
		}
		return nil, nil, exitErr(pod, "etcdserver: member not found")
	case "member remove":
		id, _ := strconv.ParseUint(words[2], 16, 64)
		i := slices.IndexFunc(f.members, func(m *fakeMember) bool { return m.id == id })
		if i < 0 {
			return nil, nil, exitErr(pod, "etcdserver: member not found")
		}
		f.members = slices.Delete(f.members, i, i+1)
		return []byte("removed"), nil, nil
	}
	return nil, nil, exitErr(pod, "unknown command "+strings.Join(words, " "))
}

// What etcdctl -w json prints, defined here from etcd's own output rather than from the
// engine's parsing types, so that a wrong field name in the engine fails its tests: etcdctl
// marshals the server's protobuf responses (etcdserverpb ResponseHeader, Member,
// MemberListResponse, MemberAddResponse, StatusResponse; etcdctl/ctlv3/command/printer_json.go)
// and wraps endpoint status and health as {"Endpoint", "Status"} and
// {"endpoint", "health", "took", "error"} (ep_command.go).
type ctlHeader struct {
	ClusterID uint64 `json:"cluster_id"`
	MemberID  uint64 `json:"member_id"`
	Revision  int64  `json:"revision"`
	RaftTerm  uint64 `json:"raft_term"`
}

type ctlMember struct {
	ID         uint64   `json:"ID"`
	Name       string   `json:"name,omitempty"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs,omitempty"`
	IsLearner  bool     `json:"isLearner,omitempty"`
}

type ctlMemberList struct {
	Header  ctlHeader   `json:"header"`
	Members []ctlMember `json:"members"`
}

type ctlMemberAdd struct {
	Header  ctlHeader   `json:"header"`
	Member  ctlMember   `json:"member"`
	Members []ctlMember `json:"members"`
}

type ctlEndpointStatus struct {
	Endpoint string `json:"Endpoint"`
	Status   struct {
		Header           ctlHeader `json:"header"`
		Version          string    `json:"version"`
		DBSize           int64     `json:"dbSize"`
		Leader           uint64    `json:"leader"`
		RaftIndex        uint64    `json:"raftIndex"`
		RaftTerm         uint64    `json:"raftTerm"`
		RaftAppliedIndex uint64    `json:"raftAppliedIndex"`
		IsLearner        bool      `json:"isLearner,omitempty"`
	} `json:"Status"`
}

type ctlEndpointHealth struct {
	Endpoint string `json:"endpoint"`
	Health   bool   `json:"health"`
	Took     string `json:"took"`
	Error    string `json:"error,omitempty"`
}

// etcdctlPrompt is what etcdctl prints when it reads --user's password from stdin.
const etcdctlPrompt = "Password:"

func (f *fakeEtcd) memberList() []byte {
	var ml ctlMemberList
	for _, m := range f.members {
		jm := ctlMember{ID: m.id, Name: m.name, PeerURLs: []string{m.peer}, IsLearner: m.learner}
		if m.name != "" {
			jm.ClientURLs = []string{m.client}
		}
		ml.Members = append(ml.Members, jm)
	}
	b, _ := json.Marshal(ml)
	return b
}

func flagValue(argv []string, name string) string {
	for _, a := range argv {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

const testNS = "db"

// fixture is a fake API with an etcd StatefulSet of `replicas` Ready pods
// and the engine wired to a scripted etcd.
type fixture struct {
	client *fake.Clientset
	etcd   *fakeEtcd
	eng    *Engine
	c      *ops.Cluster
}

func newFixture(t *testing.T, replicas int, f *fakeEtcd, mutate func(*corev1.Container, map[string]string)) *fixture {
	t.Helper()
	sts := fakecluster.StatefulSet(testNS, "etcd", int32(replicas))
	sts.Spec.ServiceName = "etcd-headless"
	sts.Spec.Template.Spec.Containers = []corev1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.8-0",
		EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "etcd-cluster-state"}}}}}}
	sts.Annotations[AnnotationPeerURLTemplate] = "http://127.0.3.{{add .Ordinal 1}}:2380"
	if mutate != nil {
		mutate(&sts.Spec.Template.Spec.Containers[0], sts.Annotations)
	}
	objs := []runtime.Object{sts}
	c := &ops.Cluster{Name: "etcd", Namespace: testNS, Engine: ops.EngineEtcd, Layout: "etcd"}
	g := &ops.NodeGroup{Name: "etcd", Owner: ops.NewStatefulSetOwner(sts), Role: ops.RoleData, Desired: int32(replicas), Current: int32(replicas)}
	for o := range replicas {
		p := fakecluster.Pod(sts, o, types.UID(fmt.Sprintf("uid-%d", o)))
		objs = append(objs, p)
		g.Pods = append(g.Pods, ops.Pod{Name: p.Name, Group: "etcd", Ordinal: o, UID: p.UID, Phase: "Running", Ready: true,
			PVCs: []string{"data-" + p.Name}})
	}
	c.Groups = []*ops.NodeGroup{g}
	client := fake.NewClientset(objs...)
	client.ClearActions()
	return &fixture{client: client, etcd: f, c: c, eng: &Engine{Client: client, Exec: f}}
}

func planText(t *testing.T, p *ops.Plan) []byte {
	t.Helper()
	var b strings.Builder
	if err := ops.WritePlanText(&b, p.View()); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}
