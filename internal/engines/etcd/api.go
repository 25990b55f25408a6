package etcd

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// apiClient speaks etcd's v3 gRPC gateway (HTTP/JSON, POST /v3/...) on one
// member's client port. The gateway marshals protobuf with the proto field
// names and uint64/int64 as decimal strings, answers errors as
// {"code": <grpc code>, "message": "etcdserver: ..."} with a non-2xx
// status, and takes the token of /v3/auth/authenticate in the
// Authorization header (as read from etcd v3.6.8 in the test bed).
type apiClient struct {
	// base is "http://127.0.0.1:PORT" or "https://..." (the forward's
	// local address; the TLS config names the member's host to verify).
	base string
	// token is set by authenticate.
	token string
	hc    *http.Client
}

func newAPIClient(addr string, tlsConf *tls.Config) *apiClient {
	scheme := "http"
	if tlsConf != nil {
		scheme = "https"
	}
	// HTTP/1.1 (no ForceAttemptHTTP2 with a custom TLS config): what
	// etcd's gateway serves on the client port next to gRPC.
	tr := &http.Transport{TLSClientConfig: tlsConf, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	return &apiClient{base: scheme + "://" + addr, hc: &http.Client{Transport: tr}}
}

func (a *apiClient) close() {
	if tr, ok := a.hc.Transport.(*http.Transport); ok {
		tr.CloseIdleConnections()
	}
}

// APIError is an error answer of the gateway: etcd's own message, which
// is what etcdctl prints after "Error: " for the same failure.
type APIError struct {
	Status  int
	Code    int
	Message string
}

func (e *APIError) Error() string { return e.Message }

// apiTimeout bounds one request; authenticate checks the password with
// bcrypt, which takes a while on a busy member.
const apiTimeout = 8 * time.Second

// call posts req as JSON to path and decodes the answer into resp.
func (a *apiClient) call(ctx context.Context, path string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encoding %s request: %w", path, err)
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	hr.Header.Set("Content-Type", "application/json")
	if a.token != "" {
		hr.Header.Set("Authorization", a.token)
	}
	res, err := a.hc.Do(hr)
	if err != nil {
		// The error names the URL (local address and path), never a body.
		return fmt.Errorf("%s: %w", path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s: reading answer: %w", path, err)
	}
	if res.StatusCode/100 != 2 {
		var ge struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Error   string `json:"error"` // older gateways
		}
		if json.Unmarshal(data, &ge) == nil && (ge.Message != "" || ge.Error != "") {
			msg := ge.Message
			if msg == "" {
				msg = ge.Error
			}
			return &APIError{Status: res.StatusCode, Code: ge.Code, Message: msg}
		}
		// Not the gateway's JSON (a proxy or server in front of it): its
		// first line says why. Answers never hold the request's password.
		line, _, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
		if len(line) > 200 {
			line = line[:200]
		}
		return &APIError{Status: res.StatusCode, Message: fmt.Sprintf("%s: HTTP %d %q", path, res.StatusCode, line)}
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(data, resp); err != nil {
		return fmt.Errorf("%s: parsing answer: %w", path, err)
	}
	return nil
}

// u64 is a uint64 the gateway writes as a decimal string.
type u64 uint64

func (v *u64) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	if uq, err := strconv.Unquote(s); err == nil {
		s = uq
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not a uint64: %s", b)
	}
	*v = u64(n)
	return nil
}

func (v u64) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(strconv.FormatUint(uint64(v), 10))), nil
}

type apiHeader struct {
	ClusterID u64 `json:"cluster_id"`
	MemberID  u64 `json:"member_id"`
	Revision  u64 `json:"revision"`
	RaftTerm  u64 `json:"raft_term"`
}

type apiMember struct {
	ID         u64      `json:"ID"`
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
	IsLearner  bool     `json:"isLearner"`
}

func (m apiMember) json() jsonMember {
	return jsonMember{ID: uint64(m.ID), Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner}
}

type apiStatus struct {
	Header           apiHeader `json:"header"`
	Version          string    `json:"version"`
	DBSize           u64       `json:"dbSize"`
	Leader           u64       `json:"leader"`
	RaftIndex        u64       `json:"raftIndex"`
	RaftTerm         u64       `json:"raftTerm"`
	RaftAppliedIndex u64       `json:"raftAppliedIndex"`
	IsLearner        bool      `json:"isLearner"`
	Errors           []string  `json:"errors"`
}

// authenticate gets a token for user; the password goes only into this
// request's body.
func (a *apiClient) authenticate(ctx context.Context, user string, password []byte) error {
	var res struct {
		Token string `json:"token"`
	}
	req := struct {
		Name     string `json:"name"`
		Password string `json:"password"`
	}{user, string(password)}
	if err := a.call(ctx, "/v3/auth/authenticate", req, &res); err != nil {
		return err
	}
	if res.Token == "" {
		return errors.New("/v3/auth/authenticate answered no token")
	}
	a.token = res.Token
	return nil
}

func (a *apiClient) memberList(ctx context.Context) ([]apiMember, apiHeader, error) {
	var res struct {
		Header  apiHeader   `json:"header"`
		Members []apiMember `json:"members"`
	}
	// etcdctl member list reads linearizably by default (--consistency=l).
	err := a.call(ctx, "/v3/cluster/member/list", map[string]any{"linearizable": true}, &res)
	return res.Members, res.Header, err
}

func (a *apiClient) memberAdd(ctx context.Context, peerURLs []string, learner bool) (apiMember, []apiMember, apiHeader, error) {
	var res struct {
		Header  apiHeader   `json:"header"`
		Member  apiMember   `json:"member"`
		Members []apiMember `json:"members"`
	}
	err := a.call(ctx, "/v3/cluster/member/add", map[string]any{"peerURLs": peerURLs, "isLearner": learner}, &res)
	return res.Member, res.Members, res.Header, err
}

func (a *apiClient) memberRemove(ctx context.Context, id uint64) error {
	return a.call(ctx, "/v3/cluster/member/remove", map[string]any{"ID": u64(id)}, nil)
}

func (a *apiClient) memberPromote(ctx context.Context, id uint64) error {
	return a.call(ctx, "/v3/cluster/member/promote", map[string]any{"ID": u64(id)}, nil)
}

func (a *apiClient) status(ctx context.Context) (apiStatus, error) {
	var res apiStatus
	err := a.call(ctx, "/v3/maintenance/status", struct{}{}, &res)
	return res, err
}

func (a *apiClient) moveLeader(ctx context.Context, target uint64) error {
	return a.call(ctx, "/v3/maintenance/transfer-leadership", map[string]any{"targetID": u64(target)}, nil)
}

func (a *apiClient) authStatus(ctx context.Context) (bool, error) {
	var res struct {
		Enabled bool `json:"enabled"`
	}
	err := a.call(ctx, "/v3/auth/status", struct{}{}, &res)
	return res.Enabled, err
}

func (a *apiClient) userList(ctx context.Context) ([]string, error) {
	var res struct {
		Users []string `json:"users"`
	}
	err := a.call(ctx, "/v3/auth/user/list", struct{}{}, &res)
	return res.Users, err
}

// health is etcdctl endpoint health's check: a linearizable read of the
// key "health" (permission denied still proves a quorum answered), then
// no active alarm.
func (a *apiClient) health(ctx context.Context) error {
	key := base64.StdEncoding.EncodeToString([]byte("health"))
	err := a.call(ctx, "/v3/kv/range", map[string]any{"key": key}, nil)
	var ae *APIError
	if err != nil && !(errors.As(err, &ae) && ae.Message == "etcdserver: "+errTextPermission) {
		return err
	}
	var alarms struct {
		Alarms []struct {
			MemberID u64    `json:"memberID"`
			Alarm    string `json:"alarm"`
		} `json:"alarms"`
	}
	err = a.call(ctx, "/v3/maintenance/alarm", map[string]any{"action": "GET"}, &alarms)
	if err != nil {
		if errors.As(err, &ae) && ae.Message == "etcdserver: "+errTextPermission {
			return nil
		}
		return err
	}
	if len(alarms.Alarms) > 0 {
		msg := "Active Alarm(s):"
		for _, al := range alarms.Alarms {
			msg += fmt.Sprintf(" %s (member %s)", al.Alarm, HexID(uint64(al.MemberID)))
		}
		return errors.New(msg)
	}
	return nil
}
