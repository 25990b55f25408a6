package lock

import (
	"net/http"
	"sync"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// dateResolution is the precision of the HTTP Date header.
const dateResolution = time.Second

// maxHeldBack bounds how far Now may be held back to avoid running
// backwards: estimation noise is at most the Date resolution plus a round
// trip, while a larger step is a real clock change and is followed.
const maxHeldBack = 2 * time.Second

// ServerClock is an ops.Clock that follows the API server's clock, learned
// from the Date header of its responses (install WrapTransport on the
// rest.Config). Lock expiry is written and judged by the server's time, so
// a client whose own clock is off neither takes over a live lock nor keeps
// one that ran out. Before any response it is the local clock. The zero
// value is ready to use and it is safe for concurrent use.
type ServerClock struct {
	// Local is the local clock; nil means time.Now. Set it before use.
	Local ops.Clock

	mu sync.Mutex
	// [lo, hi] bounds server time minus local time, narrowed by every
	// observation that agrees with the earlier ones.
	lo, hi time.Duration
	known  bool
	last   time.Time
}

var _ ops.Clock = (*ServerClock)(nil)

// NewServerClock returns a ServerClock on the local wall clock.
func NewServerClock() *ServerClock { return &ServerClock{} }

// Now is the estimated current time of the API server. It does not run
// backwards because of estimation noise.
func (c *ServerClock) Now() time.Time {
	local := c.local()
	c.mu.Lock()
	defer c.mu.Unlock()
	t := local.Add(c.offsetLocked())
	if t.Before(c.last) && c.last.Sub(t) <= maxHeldBack {
		t = c.last
	}
	c.last = t
	return t
}

// Offset is the estimated server time minus local time, and whether any
// server response has been seen yet.
func (c *ServerClock) Offset() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offsetLocked(), c.known
}

func (c *ServerClock) offsetLocked() time.Duration {
	if !c.known {
		return 0
	}
	return c.lo + (c.hi-c.lo)/2
}

// Observe learns from a response whose Date header said date, for a request
// sent and answered at the given local times. The server stamped the
// response at some local instant in [sent, received], with its clock
// somewhere in [date, date+1s), so the offset lies in
// [date-received, date+1s-sent]. Observations that agree narrow the
// estimate; one that contradicts the earlier ones means a clock was
// stepped, and it replaces them.
func (c *ServerClock) Observe(date, sent, received time.Time) {
	if date.IsZero() || received.Before(sent) {
		return
	}
	lo := date.Sub(received)
	hi := date.Add(dateResolution).Sub(sent)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.known && lo <= c.hi && hi >= c.lo {
		c.lo, c.hi = max(c.lo, lo), min(c.hi, hi)
		return
	}
	c.lo, c.hi, c.known = lo, hi, true
}

// WrapTransport returns a RoundTripper that feeds the Date header of every
// response to c. Install it with restConfig.Wrap(clock.WrapTransport).
func (c *ServerClock) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &dateTransport{clock: c, next: rt}
}

func (c *ServerClock) local() time.Time {
	var t time.Time
	if c.Local != nil {
		t = c.Local.Now()
	} else {
		t = time.Now()
	}
	// Wall time only: the result is compared with and written as wall
	// times from the server.
	return t.Round(0)
}

type dateTransport struct {
	clock *ServerClock
	next  http.RoundTripper
}

func (t *dateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := t.clock.local()
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	received := t.clock.local()
	if date, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
		t.clock.Observe(date, sent, received)
	}
	return resp, nil
}

// WrappedRoundTripper lets client-go's transport helpers see through us.
func (t *dateTransport) WrappedRoundTripper() http.RoundTripper { return t.next }
