package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// memLocker is an in-memory Locker; its journal survives "crashes"
// (separate executor runs) like the Lease annotation does.
type memLocker struct {
	mu       sync.Mutex
	holder   string
	id       string
	journal  []byte
	saves    int
	released int
	refuse   error
	// onSave, if set, is told the number of saves after each journal write.
	onSave func(saves int)
	// beforeSave, if set, sees each journal before it is written (outside mu) and may fail
	// the write.
	beforeSave func(j *Journal) error
	// oneWriteEnd makes the held lock a JournalReleaser; finals counts its
	// SaveJournalAndRelease calls (counted in saves and released too) and finalErr fails them.
	oneWriteEnd bool
	finals      int
	finalErr    error
	// watched makes the held lock a LockWatcher and a LossRecorder (and a JournalReleaser,
	// as the Lease lock is): loseLock tells the run's watch the lock is lost; afterLoss counts
	// the writes of SaveJournalAfterLoss.
	watched   bool
	watchers  chan func(error)
	afterLoss int
}

// loseLock tells the run's lock watch (waiting for it to start) that the lock was lost, as
// a deny or a release by someone else seen on the Lease would.
func (m *memLocker) loseLock(t *testing.T, err error) {
	t.Helper()
	select {
	case lost := <-m.watchers:
		lost(err)
	case <-time.After(10 * time.Second):
		t.Fatal("the run watches no lock")
	}
}

func (m *memLocker) Acquire(_ context.Context, op string) (HeldLock, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refuse != nil {
		return nil, m.refuse
	}
	if m.holder != "" && m.holder != m.id {
		return nil, Lockedf("cluster is locked by %s", m.holder)
	}
	action := LockAcquired
	if m.holder == m.id {
		action = LockExtended
	}
	m.holder = m.id
	var j *Journal
	if m.journal != nil {
		j = &Journal{}
		if err := json.Unmarshal(m.journal, j); err != nil {
			return nil, err
		}
	}
	h := &memHeld{m: m, j: j, info: LockInfo{Action: action, Holder: m.id, Operation: op,
		Expires: time.Date(2026, 11, 22, 10, 10, 0, 0, time.UTC)}}
	switch {
	case m.watched:
		if m.watchers == nil {
			m.watchers = make(chan func(error), 1)
		}
		return &memWatchedHeld{&memReleasingHeld{h}}, nil
	case m.oneWriteEnd:
		return &memReleasingHeld{h}, nil
	}
	return h, nil
}

// memWatchedHeld is a memReleasingHeld that the test can take away (memLocker.loseLock).
type memWatchedHeld struct{ *memReleasingHeld }

func (h *memWatchedHeld) WatchLock(ctx context.Context, lost func(error)) {
	select {
	case h.m.watchers <- lost:
	case <-ctx.Done():
		return
	}
	<-ctx.Done()
}

func (h *memWatchedHeld) SaveJournalAfterLoss(_ context.Context, j *Journal) error {
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	h.m.journal = b
	h.m.afterLoss++
	h.m.holder = ""
	return nil
}

// memReleasingHeld is a memHeld that saves the last journal and releases in one write.
type memReleasingHeld struct{ *memHeld }

func (h *memReleasingHeld) SaveJournalAndRelease(ctx context.Context, j *Journal) error {
	h.m.mu.Lock()
	err := h.m.finalErr
	h.m.mu.Unlock()
	if err != nil {
		return err
	}
	if err := h.SaveJournal(ctx, j); err != nil {
		return err
	}
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	h.m.finals++
	h.m.holder = ""
	h.m.released++
	return nil
}

type memHeld struct {
	m    *memLocker
	j    *Journal
	info LockInfo
}

func (h *memHeld) ID() string                              { return h.m.id }
func (h *memHeld) Info() LockInfo                          { return h.info }
func (h *memHeld) Renew(context.Context) (LockInfo, error) { return h.info, nil }
func (h *memHeld) Detach(context.Context) error            { return nil }
func (h *memHeld) Journal() *Journal                       { return h.j }
func (h *memHeld) Release(context.Context) error {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	h.m.holder = ""
	h.m.released++
	return nil
}
func (h *memHeld) SaveJournal(_ context.Context, j *Journal) error {
	if h.m.beforeSave != nil {
		if err := h.m.beforeSave(j); err != nil {
			return err
		}
	}
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	h.m.journal = b
	h.m.saves++
	if h.m.onSave != nil {
		h.m.onSave(h.m.saves)
	}
	return nil
}

func (m *memLocker) stored(t *testing.T) *Journal {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	j := &Journal{}
	if err := json.Unmarshal(m.journal, j); err != nil {
		t.Fatalf("journal: %v", err)
	}
	return j
}

func readyPod(name, ns string, labels map[string]string, uid types.UID) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: uid, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: "node-0"}, // running, so scheduled
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// testCluster builds a discovered cluster plus matching live pods.
func testCluster(groups map[string]int, order []string, masters string) (*Cluster, *fake.Clientset) {
	c := &Cluster{Name: "db", Namespace: "prod", Engine: EngineGeneric, Layout: "labels"}
	client := fake.NewClientset()
	for i, gname := range order {
		g := &NodeGroup{Name: gname, Owner: &StatefulSetOwner{Name: "db-" + gname}, Role: RoleData, Order: i,
			Desired: int32(groups[gname]), Current: int32(groups[gname]), Ready: int32(groups[gname])}
		if gname == masters {
			g.Role = RoleMaster
		}
		for o := 0; o < groups[gname]; o++ {
			name := fmt.Sprintf("db-%s-%d", gname, o)
			uid := types.UID(name + "-uid0")
			g.Pods = append(g.Pods, Pod{Name: name, Group: gname, Ordinal: o, UID: uid, Phase: "Running", Ready: true})
			_, _ = client.CoreV1().Pods("prod").Create(context.Background(), readyPod(name, "prod", nil, uid), metav1.CreateOptions{})
		}
		c.Groups = append(c.Groups, g)
	}
	c.SortGroups()
	client.ClearActions()
	return c, client
}

// memJournalLocker is a memLocker that stores the run's first journal with the write that
// takes the lock (JournalAcquirer); acquireWrites counts those writes (not in saves).
type memJournalLocker struct {
	*memLocker
	acquireWrites int
	// firstCalls counts the calls of the executor's first, calls asks for that many per
	// acquisition (a conflict makes the lock call it again).
	firstCalls, calls int
}

func (m *memJournalLocker) AcquireJournal(ctx context.Context, op string, first func(prev *Journal, holder string) (*Journal, error)) (HeldLock, error) {
	held, err := m.Acquire(ctx, op)
	if err != nil {
		return nil, err
	}
	var j *Journal
	for range max(1, m.calls) {
		var prev *Journal
		if p := held.Journal(); p != nil {
			prev = p.clone()
		}
		m.firstCalls++
		if j, err = first(prev, m.id); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.journal = b
	m.acquireWrites++
	return held, nil
}
