package lock

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// dateServer answers every request with a Date header from serverNow.
func dateServer(t *testing.T, serverNow func() time.Time) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Date", serverNow().UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, c *http.Client, url string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func TestServerClockLearnsSkewFromDateHeader(t *testing.T) {
	for _, skew := range []time.Duration{time.Hour, -time.Hour, 37 * time.Second, 0} {
		t.Run(skew.String(), func(t *testing.T) {
			srv := dateServer(t, func() time.Time { return time.Now().Add(skew) })
			c := NewServerClock()
			if _, known := c.Offset(); known {
				t.Fatal("offset known before any response")
			}
			client := &http.Client{Transport: c.WrapTransport(http.DefaultTransport)}
			for range 3 {
				get(t, client, srv.URL)
			}
			off, known := c.Offset()
			if !known {
				t.Fatal("offset not learned")
			}
			// The Date header has 1 s resolution.
			if d := off - skew; d < -1500*time.Millisecond || d > 1500*time.Millisecond {
				t.Errorf("offset = %v, want %v ± 1.5s", off, skew)
			}
			if d := c.Now().Sub(time.Now().Add(skew)); d < -1500*time.Millisecond || d > 1500*time.Millisecond {
				t.Errorf("Now() is %v off the server", d)
			}
		})
	}
}

// The wrapper works where the CLI installs it: on a rest.Config.
func TestServerClockOnRestConfig(t *testing.T) {
	srv := dateServer(t, func() time.Time { return time.Now().Add(-3 * time.Hour) })
	c := NewServerClock()
	cfg := &rest.Config{Host: srv.URL}
	cfg.Wrap(c.WrapTransport)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get(t, hc, srv.URL+"/version")
	if off, _ := c.Offset(); off > -3*time.Hour+2*time.Second || off < -3*time.Hour-2*time.Second {
		t.Errorf("offset = %v, want about -3h", off)
	}
}

func TestServerClockWithoutResponsesIsLocal(t *testing.T) {
	local := &fakeClock{t: t0}
	c := &ServerClock{Local: local}
	if got := c.Now(); !got.Equal(t0) {
		t.Errorf("Now() = %v, want local %v", got, t0)
	}
	// Responses without a usable Date header teach nothing.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Date"] = nil // suppress the server's own Date
	}))
	defer srv.Close()
	get(t, &http.Client{Transport: c.WrapTransport(nil)}, srv.URL)
	if _, known := c.Offset(); known {
		t.Error("learned an offset without a Date header")
	}
}

func TestServerClockObserve(t *testing.T) {
	local := &fakeClock{t: t0}
	c := &ServerClock{Local: local}
	server := t0.Add(time.Hour) // server is an hour ahead

	// Sent and received at t0 with Date = server: offset in [1h, 1h+1s].
	c.Observe(server, t0, t0)
	if off, _ := c.Offset(); off != time.Hour+500*time.Millisecond {
		t.Errorf("offset = %v", off)
	}
	// A second observation (Date 10 s later, seen 10.2 s later locally)
	// bounds the offset to [1h-0.2s, 1h+0.8s]; together: [1h, 1h+0.8s].
	local.Set(t0.Add(10*time.Second + 200*time.Millisecond))
	c.Observe(server.Add(10*time.Second), local.Now(), local.Now())
	if off, _ := c.Offset(); off != time.Hour+400*time.Millisecond {
		t.Errorf("narrowed offset = %v, want 1h0.4s", off)
	}
	if got := c.Now(); !got.Equal(local.Now().Add(time.Hour + 400*time.Millisecond)) {
		t.Errorf("Now() = %v", got)
	}

	// Ignored: zero dates and impossible timings.
	c.Observe(time.Time{}, t0, t0)
	c.Observe(server, t0.Add(time.Second), t0)
	if off, _ := c.Offset(); off != time.Hour+400*time.Millisecond {
		t.Errorf("bad observations changed the offset to %v", off)
	}
}

func TestServerClockDoesNotRunBackwardsOnNoise(t *testing.T) {
	local := &fakeClock{t: t0}
	c := &ServerClock{Local: local}
	c.Observe(t0, t0.Add(-2*time.Second), t0) // wide: offset in [0, 3s], estimate 1.5s
	first := c.Now()
	// A sharper observation says the offset is really [0, 0.2s]: the
	// estimate drops by 1.4 s, but Now holds rather than go back.
	c.Observe(t0, t0.Add(800*time.Millisecond), t0.Add(800*time.Millisecond))
	if got := c.Now(); got.Before(first) {
		t.Errorf("Now() went back from %v to %v", first, got)
	}
	// Once local time catches up it moves on with the better estimate.
	local.Set(t0.Add(5 * time.Second))
	if got, want := c.Now(), t0.Add(5*time.Second+100*time.Millisecond); !got.Equal(want) {
		t.Errorf("Now() = %v, want %v", got, want)
	}
}

func TestServerClockFollowsRealStep(t *testing.T) {
	local := &fakeClock{t: t0}
	c := &ServerClock{Local: local}
	c.Observe(t0, t0, t0)
	before := c.Now()
	// The server's clock was stepped back a minute (NTP fix): the old
	// estimate is contradicted and replaced.
	local.Set(t0.Add(10 * time.Second))
	c.Observe(t0.Add(-50*time.Second), local.Now(), local.Now())
	got := c.Now()
	if want := t0.Add(-50*time.Second + 500*time.Millisecond); !got.Equal(want) {
		t.Errorf("Now() = %v, want %v (before %v)", got, want, before)
	}
}

func TestServerClockConcurrentUse(t *testing.T) {
	srv := dateServer(t, func() time.Time { return time.Now().Add(time.Minute) })
	c := NewServerClock()
	client := &http.Client{Transport: c.WrapTransport(http.DefaultTransport)}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 5 {
				get(t, client, srv.URL)
				_ = c.Now()
				_, _ = c.Offset()
			}
		})
	}
	wg.Wait()
	if off, known := c.Offset(); !known || off < 58*time.Second || off > 62*time.Second {
		t.Errorf("offset = %v (known %v)", off, known)
	}
}

// Expiry is judged by the API server's clock, whatever the local clock
// says: the lease decision follows the server through ServerClock.
func TestAcquireUnderClockSkew(t *testing.T) {
	serverNow := t0
	tests := []struct {
		name      string
		localSkew time.Duration // local clock minus server clock
		renewed   time.Time     // bob's last renewal, server time, 10 min lease
		want      string        // "" means refused
	}{
		{name: "local clock ahead: live lease looks expired locally, not taken over",
			localSkew: 20 * time.Minute, renewed: serverNow.Add(-5 * time.Minute)},
		{name: "local clock behind: expired lease looks live locally, taken over",
			localSkew: -20 * time.Minute, renewed: serverNow.Add(-15 * time.Minute), want: ops.LockTakeover},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The local view alone would decide the other way.
			localNow := serverNow.Add(tc.localSkew)
			if localExpired := tc.renewed.Add(10 * time.Minute).Before(localNow); localExpired != (tc.want == "") {
				t.Fatal("test case does not exercise the skew")
			}

			f := newFixture(t, testLease(heldBy(bob, "restart --rolling", tc.renewed, 600)))
			clock := &ServerClock{Local: &fakeClock{t: localNow}}
			srv := dateServer(t, func() time.Time { return serverNow })
			get(t, &http.Client{Transport: clock.WrapTransport(nil)}, srv.URL)

			m := NewManager(f.cs, testNS, testCluster, me, clock)
			held, err := m.Acquire(context.Background(), "scale")
			if tc.want == "" {
				if !errors.Is(err, ops.ErrLocked) {
					t.Fatalf("err = %v, want ErrLocked", err)
				}
				f.assertNoWrites()
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if held.Info().Action != tc.want {
				t.Errorf("action = %q", held.Info().Action)
			}
			// What we write is server time too, so others judge our
			// expiry correctly.
			l := f.stored()
			if d := l.Spec.RenewTime.Sub(serverNow); d < 0 || d > time.Second {
				t.Errorf("renewTime %v is not server time %v", l.Spec.RenewTime, serverNow)
			}
		})
	}
}
