package etcd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
)

// etcdctl error texts the procedures react to.
const (
	errTextNotInSync      = "can only promote a learner member which is in sync with leader"
	errTextNotStarted     = "can only promote a learner member which is started" // older servers
	errTextMemberNotFound = "member not found"
	errTextNotLearner     = "can only promote a learner member"
	// errTextUnhealthy is etcd's strict reconfiguration check: the leader
	// has not been connected to every peer for a few seconds (just after
	// start-up or a restart). It clears by itself.
	errTextUnhealthy = "unhealthy cluster"
)

// reconfigRetry bounds how long a membership change is retried while etcd
// answers errTextUnhealthy; it must stay well within the executor's grace
// period because membership changes run as step actions.
const reconfigRetry = 20 * time.Second

// reconfig runs a membership change, retrying at interval while etcd says
// the cluster is not yet fully connected.
func (c *ctl) reconfig(ctx context.Context, pod, op string, interval time.Duration, args ...string) ([]byte, error) {
	deadline := time.Now().Add(reconfigRetry)
	for {
		out, err := c.run(ctx, pod, op, args...)
		if err == nil || !isCtlError(err, errTextUnhealthy) || time.Now().After(deadline) {
			return out, err
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return out, err
		case <-t.C:
		}
	}
}

// CtlError is a failed etcdctl call: the exit code and etcdctl's own
// "Error: ..." line. It never holds the command line, which may carry
// credentials.
type CtlError struct {
	Pod  string
	Op   string
	Code int
	Msg  string
	Err  error
	// Via is what ran the command: "" for etcdctl by exec, "etcd API" for
	// the gateway over a port-forward (apictl.go).
	Via string
}

func (e *CtlError) Error() string {
	via := "etcdctl"
	if e.Via != "" {
		via = e.Via
	}
	if e.Msg != "" {
		return fmt.Sprintf("%s %s in pod %s: %s", via, e.Op, e.Pod, e.Msg)
	}
	return fmt.Sprintf("%s %s in pod %s: %v", via, e.Op, e.Pod, e.Err)
}

func (e *CtlError) Unwrap() error { return e.Err }

// Contains reports whether etcdctl's message holds text.
func (e *CtlError) Contains(text string) bool { return strings.Contains(e.Msg, text) }

// ctlMessage extracts etcdctl's "Error: ..." line, falling back to the
// last non-empty line of stderr (etcd client logs are JSON noise before it).
func ctlMessage(stderr []byte) string {
	lines := strings.Split(strings.TrimSpace(string(stderr)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "Error: ") {
			return strings.TrimPrefix(l, "Error: ")
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "{") {
			return l
		}
	}
	return ""
}

func isCtlError(err error, text string) bool {
	var ce *CtlError
	return errors.As(err, &ce) && ce.Contains(text)
}

// ctl runs etcdctl in pods with the connection flags of one cluster.
type ctl struct {
	exec      kube.Executor
	namespace string
	container string
	// conn picks the --endpoints of each pod (conn.go); nil when the pod
	// sets ETCDCTL_ENDPOINTS. spec is never nil: the member's listeners and
	// advertised URLs, for the etcd API path.
	conn *clientConn
	spec *clientConn
	// flags go before the subcommand (TLS files, timeouts).
	flags []string
	// files are the client TLS files of flags (or of the pod's ETCDCTL_*).
	files tlsFiles
	// api, when set, serves every command from etcd's gateway over a
	// port-forward instead (apictl.go): etcdctl in the image cannot take
	// the password.
	api *apiCtl

	mu sync.Mutex
	// user and password authenticate etcdctl: --user names the user only,
	// so etcdctl asks for the password and reads it from stdin (its prompt,
	// bgentry/speakeasy, reads a line from a non-terminal stdin too). The
	// password is never an argument and never passes through a shell.
	user     string
	password []byte
	// credsFrom says where the password came from, for plan details.
	credsFrom string
}

func (c *ctl) setCredentials(user string, password []byte, from string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.user, c.password, c.credsFrom = user, password, from
}

// authenticated reports whether etcdctl runs with a password.
func (c *ctl) authenticated() bool {
	_, pw, _ := c.credentials()
	return len(pw) > 0
}

func (c *ctl) credentials() (string, []byte, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.user, c.password, c.credsFrom
}

// argv builds the command line for etcdctl args in pod; stdin is the
// password line when credentials are set (and withCreds).
func (c *ctl) argv(pod string, withCreds bool, args []string) (argv []string, stdin []byte, err error) {
	return c.argvTo(pod, withCreds, nil, args)
}

// argvTo is argv with explicit endpoints (nil: the pod's own).
func (c *ctl) argvTo(pod string, withCreds bool, endpoints []string, args []string) (argv []string, stdin []byte, err error) {
	argv = []string{"etcdctl"}
	if len(endpoints) > 0 {
		argv = append(argv, "--endpoints="+strings.Join(endpoints, ","))
	} else if c.conn != nil {
		ep, err := c.conn.endpointFor(pod)
		if err != nil {
			return nil, nil, err
		}
		// etcdctl's own default is this address: leave it to etcdctl, so an
		// ETCDCTL_ENDPOINTS the image (not the pod spec) sets stays in force.
		if !isCtlDefault(ep) {
			argv = append(argv, "--endpoints="+ep)
		}
	}
	argv = append(argv, c.flags...)
	if user, pw, _ := c.credentials(); withCreds && len(pw) > 0 {
		// The client authenticates within the dial timeout, and etcd checks
		// the password with bcrypt: on a busy member that takes longer than
		// a plain dial. The later flag wins.
		argv = append(argv, "--user="+user, "--dial-timeout="+authDialTimeout)
		stdin = append(append([]byte{}, pw...), '\n')
	}
	argv = append(argv, args...)
	return argv, stdin, nil
}

// authDialTimeout bounds dialing plus authenticating.
const authDialTimeout = "8s"

// isCtlDefault reports whether ep is etcdctl's default endpoint,
// plain http on the loopback port 2379.
func isCtlDefault(ep string) bool {
	return ep == "http://127.0.0.1:2379" || ep == "http://localhost:2379"
}

// describe renders the command for plan details, with no secret in it.
func (c *ctl) describe(args ...string) string {
	if c.api != nil {
		scheme := "http"
		if c.api.tls != nil {
			scheme = "https"
		}
		parts := []string{"etcd API (" + scheme + " over a port-forward to the pod's client port " + strconv.Itoa(c.api.port)}
		if user, pw, from := c.credentials(); len(pw) > 0 {
			parts[0] += ", user " + user + ", password from " + from
		}
		parts[0] += "):"
		return strings.Join(append(parts, args...), " ")
	}
	parts := []string{"etcdctl"}
	if c.conn != nil {
		// Pod-independent endpoints (loopback, option) are shown as they are.
		ep, err := c.conn.endpointFor("\x00a")
		if ep2, err2 := c.conn.endpointFor("\x00b"); err != nil || err2 != nil || ep != ep2 {
			ep = "<the pod's own client URL>"
		}
		if !isCtlDefault(ep) {
			parts = append(parts, "--endpoints="+ep)
		}
	}
	if user, pw, from := c.credentials(); len(pw) > 0 {
		parts = append(parts, "--user="+user, "(password on stdin from "+from+")")
	}
	parts = append(parts, c.flags...)
	return strings.Join(append(parts, args...), " ")
}

// subcommand is the etcdctl subcommand of args (its first two positional words, "member
// remove"; one for "move-leader"), so that a change is guarded by what runs, not only by the
// label its caller gives it.
func subcommand(args []string) string {
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			continue
		}
		words = append(words, a)
		if len(words) == 2 || a == "move-leader" {
			break
		}
	}
	return strings.Join(words, " ")
}

// changesCluster reports whether etcdctl operation op changes the cluster (membership,
// leadership) rather than reads it.
func changesCluster(op string) bool {
	switch op {
	case "member add", "member remove", "member promote", "move-leader":
		return true
	}
	return false
}

// run executes etcdctl args in pod, authenticated when credentials are set.
// On a non-zero exit it returns stdout together with a *CtlError.
func (c *ctl) run(ctx context.Context, pod, op string, args ...string) ([]byte, error) {
	return c.runAs(ctx, pod, true, op, args...)
}

func (c *ctl) runAs(ctx context.Context, pod string, withCreds bool, op string, args ...string) ([]byte, error) {
	return c.runTo(ctx, pod, withCreds, nil, op, args...)
}

func (c *ctl) runTo(ctx context.Context, pod string, withCreds bool, endpoints []string, op string, args ...string) ([]byte, error) {
	if changesCluster(op) || changesCluster(subcommand(args)) {
		// A run that lost its lock starts no membership or leadership change.
		if err := kube.CheckWriteGuard(ctx); err != nil {
			return nil, fmt.Errorf("not running etcdctl %s in %s: %w", op, pod, err)
		}
	}
	if c.api != nil {
		return c.api.run(ctx, pod, withCreds, endpoints, op, args)
	}
	argv, stdin, err := c.argvTo(pod, withCreds, endpoints, args)
	if err != nil {
		return nil, err
	}
	var in io.Reader
	if stdin != nil {
		in = bytes.NewReader(stdin)
	}
	stdout, stderr, err := c.exec.Exec(ctx, c.namespace, pod, c.container, argv, in)
	if err == nil {
		return stdout, nil
	}
	ce := &CtlError{Pod: pod, Op: op, Err: err}
	var xe *kube.ExitError
	if errors.As(err, &xe) {
		ce.Code = xe.Code
		if len(stderr) == 0 {
			stderr = xe.Stderr
		}
		ce.Msg = ctlMessage(stderr)
	}
	return stdout, ce
}

// passwordPrompt is what etcdctl prints on stdout when it reads the
// password of --user from stdin.
const passwordPrompt = "Password:"

// ---- JSON shapes of etcdctl -w json (IDs are decimal uint64) ----

type jsonMember struct {
	ID         uint64   `json:"ID"`
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
	IsLearner  bool     `json:"isLearner"`
}

type jsonHeader struct {
	ClusterID uint64 `json:"cluster_id"`
	MemberID  uint64 `json:"member_id"`
	Revision  int64  `json:"revision"`
	RaftTerm  uint64 `json:"raft_term"`
}

type jsonMemberList struct {
	Header  jsonHeader   `json:"header"`
	Members []jsonMember `json:"members"`
}

type jsonMemberAdd struct {
	Header  jsonHeader   `json:"header"`
	Member  jsonMember   `json:"member"`
	Members []jsonMember `json:"members"`
}

type jsonEndpointStatus struct {
	Endpoint string `json:"Endpoint"`
	Status   struct {
		Header           jsonHeader `json:"header"`
		Version          string     `json:"version"`
		DBSize           int64      `json:"dbSize"`
		Leader           uint64     `json:"leader"`
		RaftIndex        uint64     `json:"raftIndex"`
		RaftTerm         uint64     `json:"raftTerm"`
		RaftAppliedIndex uint64     `json:"raftAppliedIndex"`
		IsLearner        bool       `json:"isLearner"`
		Errors           []string   `json:"errors"`
	} `json:"Status"`
}

type jsonEndpointHealth struct {
	Endpoint string `json:"endpoint"`
	Health   bool   `json:"health"`
	Took     string `json:"took"`
	Error    string `json:"error"`
}

// HexID renders a member ID the way member remove/promote take it.
func HexID(id uint64) string { return strconv.FormatUint(id, 16) }

// ParseHexID parses a member ID in hex.
func ParseHexID(s string) (uint64, error) {
	id, err := strconv.ParseUint(strings.TrimSpace(s), 16, 64)
	if err != nil {
		return 0, fmt.Errorf("member ID %q is not hex: %w", s, err)
	}
	return id, nil
}

// decode parses JSON that etcdctl printed. etcdctl may print nothing when
// every endpoint failed; that is reported as an error too.
func decode(out []byte, v any, what string) error {
	out = bytes.TrimSpace(out)
	// etcdctl's password prompt goes to stdout before the JSON.
	out = bytes.TrimSpace(bytes.TrimPrefix(out, []byte(passwordPrompt)))
	if len(out) == 0 {
		return fmt.Errorf("etcdctl %s printed nothing", what)
	}
	// Decode the first value only: some versions print more after it.
	dec := json.NewDecoder(bytes.NewReader(out))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("parsing etcdctl %s output: %w", what, err)
	}
	return nil
}

// ParseMemberList parses `etcdctl member list -w json`.
func ParseMemberList(out []byte) ([]Member, error) {
	var ml jsonMemberList
	if err := decode(out, &ml, "member list"); err != nil {
		return nil, err
	}
	members := make([]Member, 0, len(ml.Members))
	for _, m := range ml.Members {
		members = append(members, memberFromJSON(m))
	}
	return members, nil
}

// ParseMemberAdd parses `etcdctl member add -w json` and returns the new member.
func ParseMemberAdd(out []byte) (Member, error) {
	var ma jsonMemberAdd
	if err := decode(out, &ma, "member add"); err != nil {
		return Member{}, err
	}
	if ma.Member.ID == 0 {
		return Member{}, errors.New("etcdctl member add printed no member ID")
	}
	return memberFromJSON(ma.Member), nil
}

func memberFromJSON(m jsonMember) Member {
	return Member{ID: HexID(m.ID), Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, Learner: m.IsLearner}
}

// EndpointStatus is one entry of `etcdctl endpoint status -w json`.
type EndpointStatus struct {
	Endpoint  string
	MemberID  string
	Leader    string
	RaftTerm  uint64
	RaftIndex uint64
	Applied   uint64
	Revision  int64
	Version   string
	Learner   bool
	Errors    []string
}

// ParseEndpointStatus parses `etcdctl endpoint status -w json`.
func ParseEndpointStatus(out []byte) ([]EndpointStatus, error) {
	var raw []jsonEndpointStatus
	if err := decode(out, &raw, "endpoint status"); err != nil {
		return nil, err
	}
	res := make([]EndpointStatus, 0, len(raw))
	for _, r := range raw {
		s := r.Status
		res = append(res, EndpointStatus{Endpoint: r.Endpoint, MemberID: HexID(s.Header.MemberID), Leader: HexID(s.Leader),
			RaftTerm: s.RaftTerm, RaftIndex: s.RaftIndex, Applied: s.RaftAppliedIndex, Revision: s.Header.Revision,
			Version: s.Version, Learner: s.IsLearner, Errors: s.Errors})
	}
	return res, nil
}

// EndpointHealth is one entry of `etcdctl endpoint health -w json`.
type EndpointHealth struct {
	Endpoint string
	Healthy  bool
	Error    string
}

// ParseEndpointHealth parses `etcdctl endpoint health -w json`.
func ParseEndpointHealth(out []byte) ([]EndpointHealth, error) {
	var raw []jsonEndpointHealth
	if err := decode(out, &raw, "endpoint health"); err != nil {
		return nil, err
	}
	res := make([]EndpointHealth, 0, len(raw))
	for _, r := range raw {
		res = append(res, EndpointHealth{Endpoint: r.Endpoint, Healthy: r.Health, Error: r.Error})
	}
	return res, nil
}
