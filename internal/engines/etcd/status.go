package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Member is one etcd member as etcd and Kubernetes see it.
type Member struct {
	// ID is the member ID in hex (the form member remove/promote take).
	ID         string   `json:"id"`
	Name       string   `json:"name,omitempty"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs,omitempty"`
	Learner    bool     `json:"learner,omitempty"`
	// Pod is the pod the member belongs to (by name, else by peer URL);
	// empty when none matches.
	Pod     string `json:"pod,omitempty"`
	Ordinal int    `json:"ordinal"`
	// Healthy: a voter answered a quorum read; a learner (which cannot)
	// answered endpoint status.
	Healthy   bool   `json:"healthy"`
	Leader    bool   `json:"leader,omitempty"`
	RaftTerm  uint64 `json:"raftTerm,omitempty"`
	RaftIndex uint64 `json:"raftIndex,omitempty"`
	Error     string `json:"error,omitempty"`
	// StatusHidden: a started learner of a cluster with auth enabled, whose
	// endpoint status cannot be read (etcd answers Authenticate only on
	// voters: "rpc not supported for learner"); etcd's own in-sync check
	// at promotion is then the only catch-up check.
	StatusHidden bool `json:"statusHidden,omitempty"`
}

// Started reports whether the member has run at least once: etcd fills in
// the name only when the member first connects.
func (m *Member) Started() bool { return m.Name != "" }

// HasPeerURL reports whether u is one of the member's peer URLs.
func (m *Member) HasPeerURL(u string) bool { return slices.Contains(m.PeerURLs, u) }

// Status is the state of an etcd cluster.
type Status struct {
	Members []Member `json:"members"`
	// LeaderID is the leader's member ID in hex ("" when none is known).
	LeaderID string `json:"leaderID,omitempty"`
	// Via is the pod whose etcdctl answered.
	Via           string `json:"via"`
	Voters        int    `json:"voters"`
	Learners      int    `json:"learners"`
	HealthyVoters int    `json:"healthyVoters"`
	Quorum        int    `json:"quorum"`
	HasQuorum     bool   `json:"hasQuorum"`
}

// Quorum is the number of healthy voters etcd needs to make progress.
func Quorum(voters int) int { return voters/2 + 1 }

// QuorumAfterRemoval reports whether a cluster with the given voters and
// healthy voters keeps a quorum after removing one member, where
// removedVoter/removedHealthy describe that member.
func QuorumAfterRemoval(voters, healthyVoters int, removedVoter, removedHealthy bool) bool {
	if removedVoter {
		voters--
		if removedHealthy {
			healthyVoters--
		}
	}
	return voters >= 1 && healthyVoters >= Quorum(voters)
}

// Leader returns the leader member, or nil.
func (s *Status) Leader() *Member {
	for i := range s.Members {
		if s.Members[i].Leader {
			return &s.Members[i]
		}
	}
	return nil
}

// ByPod returns the member of pod, or nil.
func (s *Status) ByPod(pod string) *Member {
	for i := range s.Members {
		if s.Members[i].Pod == pod {
			return &s.Members[i]
		}
	}
	return nil
}

// ByPeerURL returns the member with peer URL u, or nil.
func (s *Status) ByPeerURL(u string) *Member {
	for i := range s.Members {
		if s.Members[i].HasPeerURL(u) {
			return &s.Members[i]
		}
	}
	return nil
}

// Unhealthy lists the members that are not healthy, skipping those for
// which skip returns true.
func (s *Status) Unhealthy(skip func(*Member) bool) []*Member {
	var out []*Member
	for i := range s.Members {
		m := &s.Members[i]
		if !m.Healthy && (skip == nil || !skip(m)) {
			out = append(out, m)
		}
	}
	return out
}

// Summary is the one-line health text: "3/3 healthy, leader etcd-1".
func (s *Status) Summary() string {
	healthy := 0
	for _, m := range s.Members {
		if m.Healthy {
			healthy++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d healthy", healthy, len(s.Members))
	if s.Learners > 0 {
		fmt.Fprintf(&b, " (%d learner(s))", s.Learners)
	}
	if l := s.Leader(); l != nil {
		fmt.Fprintf(&b, ", leader %s", l.label())
	} else {
		b.WriteString(", no leader")
	}
	if !s.HasQuorum {
		fmt.Fprintf(&b, ", quorum lost (%d of %d voters needed)", s.Quorum, s.Voters)
	}
	return b.String()
}

// label names a member for messages: its pod, else its name, else its ID.
func (m *Member) label() string {
	switch {
	case m.Pod != "":
		return m.Pod
	case m.Name != "":
		return m.Name
	default:
		return m.ID
	}
}

// HealthStatus is healthy|degraded|no-quorum.
func (s *Status) HealthStatus() string {
	switch {
	case !s.HasQuorum:
		return "no-quorum"
	case len(s.Unhealthy(nil)) > 0 || s.Learners > 0:
		return "degraded"
	default:
		return "healthy"
	}
}

// assemble fills in leader, health and the quorum counts from the three
// etcdctl answers. Endpoints are matched to members by member ID (status)
// and client URL (health).
func assemble(via string, members []Member, statuses []EndpointStatus, health []EndpointHealth) *Status {
	st := &Status{Members: members, Via: via}
	byID := map[string]EndpointStatus{}
	for _, es := range statuses {
		byID[es.MemberID] = es
		// Prefer the leader a voter reports; learners also know it.
		if st.LeaderID == "" || !es.Learner {
			if es.Leader != "0" {
				st.LeaderID = es.Leader
			}
		}
	}
	healthByURL := map[string]EndpointHealth{}
	for _, h := range health {
		healthByURL[h.Endpoint] = h
	}
	for i := range st.Members {
		m := &st.Members[i]
		es, answered := byID[m.ID]
		if answered {
			m.RaftTerm, m.RaftIndex = es.RaftTerm, es.RaftIndex
			if len(es.Errors) > 0 {
				m.Error = strings.Join(es.Errors, "; ")
			}
		}
		m.Leader = m.ID == st.LeaderID
		if m.Learner {
			st.Learners++
			m.Healthy = answered && len(es.Errors) == 0
			if !answered && m.Error == "" {
				m.Error = "no answer to endpoint status"
			}
			continue
		}
		st.Voters++
		for _, u := range m.ClientURLs {
			if h, ok := healthByURL[u]; ok {
				m.Healthy = h.Healthy && answered
				if !h.Healthy && h.Error != "" {
					m.Error = h.Error
				}
				break
			}
		}
		switch {
		case !m.Started() && m.Error == "":
			m.Error = "never started"
		case !answered && m.Error == "":
			// Healthy by endpoint health but silent to endpoint status (a timed-out
			// answer): say so, or a refusal would name it without a reason.
			m.Error = "no answer to endpoint status"
		}
		if m.Healthy {
			st.HealthyVoters++
		}
	}
	st.Quorum = Quorum(st.Voters)
	st.HasQuorum = st.Voters > 0 && st.HealthyVoters >= st.Quorum
	return st
}

// fetchStatus asks etcd, through the first of pods whose etcdctl answers
// member list, for members, endpoint status and endpoint health. exclude
// is a pod not to ask (one about to be removed or restarted).
func (c *ctl) fetchStatus(ctx context.Context, pods []string, exclude string) (*Status, error) {
	var errs []error
	for _, pod := range pods {
		if pod == exclude {
			continue
		}
		out, err := c.run(ctx, pod, "member list", "member", "list", "-w", "json")
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			errs = append(errs, err)
			continue
		}
		members, err := ParseMemberList(out)
		if err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", pod, err))
			continue
		}
		// With auth on, etcdctl authenticates on every endpoint it dials and a
		// learner refuses that, failing the whole --cluster command: ask the
		// started voters by their client URLs instead.
		var eps []string
		target := []string{"--cluster"}
		if c.authenticated() {
			target = nil
			for _, m := range members {
				if !m.Learner && m.Started() {
					eps = append(eps, m.ClientURLs...)
				}
			}
		}
		// Both commands exit non-zero when an endpoint is down but still
		// print what they got from the others.
		sout, serr := c.runTo(ctx, pod, true, eps, "endpoint status", append(append([]string{"endpoint", "status"}, target...), "-w", "json")...)
		statuses, perr := ParseEndpointStatus(sout)
		if perr != nil && serr != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		hout, herr := c.runTo(ctx, pod, true, eps, "endpoint health", append(append([]string{"endpoint", "health"}, target...), "-w", "json")...)
		health, perr2 := ParseEndpointHealth(hout)
		if perr2 != nil && herr != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		st := assemble(pod, members, statuses, health)
		// Say why nobody answered rather than leave members unexplained.
		var ce *CtlError
		if len(statuses) == 0 && errors.As(serr, &ce) && ce.Msg != "" {
			for i := range st.Members {
				if m := &st.Members[i]; !m.Healthy && (m.Error == "" || m.Error == "no answer to endpoint status") {
					m.Error = "endpoint status: " + ce.Msg
				}
			}
		}
		if c.authenticated() {
			for i := range st.Members {
				if m := &st.Members[i]; m.Learner && m.Started() && !m.Healthy {
					m.StatusHidden = true
					m.Error = "status not readable with auth enabled (learners refuse authentication)"
				}
			}
		}
		return st, nil
	}
	if len(errs) == 0 {
		return nil, errors.New("no running etcd pod to ask")
	}
	// One line: it ends up in status output and refusal messages.
	msgs := make([]string, 0, len(errs))
	for _, err := range errs {
		msgs = append(msgs, err.Error())
	}
	return nil, fmt.Errorf("no etcd member answered member list: %s: %w", strings.Join(msgs, "; "), errs[0])
}
