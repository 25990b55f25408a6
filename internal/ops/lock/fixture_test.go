package lock

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

const (
	testNS      = "prod"
	testCluster = "mycrate"
	me          = "alice@api.example:6443"
	bob         = "bob@api.example:6443"
	carol       = "carol@api.example:6443"
)

var (
	t0        = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	leaseGVR  = coordinationv1.SchemeGroupVersion.WithResource("leases")
	leaseName = LeaseName(testCluster)
)

// fakeClock is a settable ops.Clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// fixture is a fake clientset that, unlike the stock one, enforces
// resourceVersion preconditions on leases like the API server does, and
// can let "someone else" write just before our next create or update.
type fixture struct {
	t     *testing.T
	cs    *fake.Clientset
	clock *fakeClock

	mu           sync.Mutex
	rv           int
	beforeUpdate func()
	beforeCreate func()
}

func newFixture(t *testing.T, leases ...*coordinationv1.Lease) *fixture {
	t.Helper()
	f := &fixture{t: t, cs: fake.NewClientset(), clock: &fakeClock{t: t0}, rv: 100}
	for _, l := range leases {
		l = l.DeepCopy()
		l.ResourceVersion = f.nextRV()
		if err := f.cs.Tracker().Add(l); err != nil {
			t.Fatal(err)
		}
	}
	f.cs.PrependReactor("create", "leases", f.create)
	f.cs.PrependReactor("update", "leases", f.update)
	return f
}

func (f *fixture) manager(id string) *Manager {
	return NewManager(f.cs, testNS, testCluster, id, f.clock)
}

func (f *fixture) nextRV() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv++
	return strconv.Itoa(f.rv)
}

// hook takes a one-shot interference hook.
func (f *fixture) hook(p *func()) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := *p
	*p = nil
	return h
}

func (f *fixture) create(action k8stesting.Action) (bool, runtime.Object, error) {
	if h := f.hook(&f.beforeCreate); h != nil {
		h()
	}
	l := action.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
	if l.ResourceVersion != "" {
		return true, nil, apierrors.NewBadRequest("resourceVersion must not be set on create")
	}
	l.ResourceVersion = f.nextRV()
	if err := f.cs.Tracker().Create(leaseGVR, l, l.Namespace); err != nil {
		return true, nil, err
	}
	return true, l.DeepCopy(), nil
}

func (f *fixture) update(action k8stesting.Action) (bool, runtime.Object, error) {
	if h := f.hook(&f.beforeUpdate); h != nil {
		h()
	}
	l := action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
	cur, err := f.cs.Tracker().Get(leaseGVR, l.Namespace, l.Name)
	if err != nil {
		return true, nil, err
	}
	if l.ResourceVersion != cur.(*coordinationv1.Lease).ResourceVersion {
		return true, nil, apierrors.NewConflict(leaseGVR.GroupResource(), l.Name,
			fmt.Errorf("resourceVersion %s is stale", l.ResourceVersion))
	}
	l.ResourceVersion = f.nextRV()
	if err := f.cs.Tracker().Update(leaseGVR, l, l.Namespace); err != nil {
		return true, nil, err
	}
	return true, l.DeepCopy(), nil
}

// stored reads the lease straight from the tracker (safe inside reactors).
func (f *fixture) stored() *coordinationv1.Lease {
	f.t.Helper()
	obj, err := f.cs.Tracker().Get(leaseGVR, testNS, leaseName)
	if err != nil {
		f.t.Fatalf("reading stored lease: %v", err)
	}
	return obj.(*coordinationv1.Lease).DeepCopy()
}

func (f *fixture) exists() bool {
	_, err := f.cs.Tracker().Get(leaseGVR, testNS, leaseName)
	return err == nil
}

// put is "someone else" writing the lease, bumping its resourceVersion.
func (f *fixture) put(mutate func(l *coordinationv1.Lease)) {
	f.t.Helper()
	l := f.stored()
	mutate(l)
	l.ResourceVersion = f.nextRV()
	if err := f.cs.Tracker().Update(leaseGVR, l, testNS); err != nil {
		f.t.Fatal(err)
	}
}

// putNew is "someone else" creating the lease.
func (f *fixture) putNew(l *coordinationv1.Lease) {
	f.t.Helper()
	l = l.DeepCopy()
	l.ResourceVersion = f.nextRV()
	if err := f.cs.Tracker().Create(leaseGVR, l, testNS); err != nil {
		f.t.Fatal(err)
	}
}

// verbs lists the verbs of the recorded API calls.
func (f *fixture) verbs() []string {
	var out []string
	for _, a := range f.cs.Actions() {
		out = append(out, a.GetVerb())
	}
	return out
}

// assertUnchanged fails if the stored lease is no longer the one with resourceVersion rv: a
// held lock writes optimistically from its cached lease, so an update may reach the API, but
// one carrying a stale resourceVersion is rejected and changes nothing.
func (f *fixture) assertUnchanged(rv string) {
	f.t.Helper()
	if got := f.stored().ResourceVersion; got != rv {
		f.t.Errorf("lease was written (resourceVersion %s, want %s); all calls: %v", got, rv, f.verbs())
	}
}

// assertNoWrites fails if anything but reads reached the API.
func (f *fixture) assertNoWrites() {
	f.t.Helper()
	for _, a := range f.cs.Actions() {
		if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
			f.t.Errorf("unexpected write %s %s; all calls: %v", v, a.GetResource().Resource, f.verbs())
		}
	}
}

type leaseOpt func(*coordinationv1.Lease)

func testLease(opts ...leaseOpt) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: testNS,
		Labels: map[string]string{LabelManagedBy: ManagedByValue, LabelCluster: testCluster}}}
	for _, o := range opts {
		o(l)
	}
	return l
}

// heldBy sets a holder renewed at renewed with a duration of seconds.
func heldBy(id, operation string, renewed time.Time, seconds int32) leaseOpt {
	return func(l *coordinationv1.Lease) {
		acquired := metav1.NewMicroTime(renewed.Add(-time.Minute))
		renew := metav1.NewMicroTime(renewed)
		l.Spec.HolderIdentity = &id
		l.Spec.AcquireTime = &acquired
		l.Spec.RenewTime = &renew
		l.Spec.LeaseDurationSeconds = &seconds
		setAnnotation(l, AnnotationOperation, operation)
	}
}

func withAnnotation(key, value string) leaseOpt {
	return func(l *coordinationv1.Lease) { setAnnotation(l, key, value) }
}

func withDenied(entries ...DenyEntry) leaseOpt {
	return withAnnotation(AnnotationDenyList, mustJSON(entries))
}

func withJournal(j *ops.Journal) leaseOpt {
	return withAnnotation(AnnotationJournal, mustJSON(j))
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
