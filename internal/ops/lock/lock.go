// Package lock implements the per-cluster lock and deny list (after the
// FoundationDB operator) on a coordination.k8s.io/v1 Lease.
//
// One Lease per database cluster, named dbops-<cluster> in the cluster's
// namespace, carries the holder in its spec and, in annotations, what the
// holder is doing, the deny list with its history, and the journal of the
// last operation. Every write is a read-modify-write under the read
// resourceVersion; after a conflict the decision is taken again on fresh
// state, so two users can never both believe they hold the lock.
package lock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Names of the labels and annotations on the lock Lease. They are read by
// other tools and by older versions of this one; do not rename them.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelCluster   = "dbops.io/cluster"
	ManagedByValue = "kubectl-dbops"

	// AnnotationOperation says what the holder is doing (e.g. "restart --rolling").
	AnnotationOperation = "dbops.io/operation"
	// AnnotationReason is the free text given with `lock acquire --reason`.
	AnnotationReason = "dbops.io/reason"
	// AnnotationDenyList is a JSON array of DenyEntry.
	AnnotationDenyList = "dbops.io/deny-list"
	// AnnotationDenyHistory is a JSON array of DenyRecord, oldest first,
	// bounded to MaxDenyHistory entries.
	AnnotationDenyHistory = "dbops.io/deny-history"
	// AnnotationJournal is the JSON form of ops.Journal.
	AnnotationJournal = "dbops.io/journal"
	// AnnotationSession identifies the running kubectl-dbops process that
	// holds the lock, so a second invocation under the same lock ID (the
	// same user in another terminal) is refused while the first is alive.
	AnnotationSession = "dbops.io/session"
)

const (
	// LeasePrefix prefixes the cluster name to form the Lease name.
	LeasePrefix = "dbops-"
	// DefaultSessionTimeout: see Manager.SessionTimeout.
	DefaultSessionTimeout = time.Minute
	// DefaultDuration is how long a lock lasts without renewal.
	DefaultDuration = 10 * time.Minute
	// MaxDenyHistory bounds the deny/allow history kept on the Lease.
	MaxDenyHistory = 20
)

// LeaseName returns the name of the lock Lease for cluster.
// ManualOperation is the operation a hold taken by hand (`lock acquire`) records.
const ManualOperation = "manual lock"

func LeaseName(cluster string) string { return LeasePrefix + cluster }

// Manager takes and inspects the lock of one database cluster on behalf of
// one lock ID. Its fields are dependencies; set them before first use and
// do not change them afterwards.
type Manager struct {
	Client    kubernetes.Interface
	Namespace string
	Cluster   string
	// ID is the lock ID this process acts as (see DefaultID).
	ID string
	// Duration is how long an acquisition or renewal lasts; zero means
	// DefaultDuration.
	Duration time.Duration
	// Session identifies this process when it runs an operation (empty for
	// `lock acquire`, whose hold is meant to be shared by the user's later
	// commands). See AnnotationSession.
	Session string
	// SessionTimeout is how long after its last renewal another session of
	// the same ID counts as alive; zero means DefaultSessionTimeout. A
	// running operation renews well within it (ops.Executor renews every
	// 15 s at most).
	SessionTimeout time.Duration
	// Clock must follow the API server's clock (see ServerClock): expiry is
	// judged by the server's time, not the local one. Nil means the local
	// clock.
	Clock ops.Clock
	// Force lets an acquisition take over, and Release give up, a lock someone else holds
	// and has not let expire (`lock acquire|release --force`). A denied ID still never
	// acquires.
	Force bool

	// seen is the lease as a Status read it (Seen): the next acquisition decides and writes
	// from it instead of reading it again.
	seen        *coordinationv1.Lease
	seenMissing bool
}

var _ ops.Locker = (*Manager)(nil)

// NewManager returns a Manager with the default lock duration.
func NewManager(client kubernetes.Interface, namespace, cluster, id string, clock ops.Clock) *Manager {
	return &Manager{Client: client, Namespace: namespace, Cluster: cluster, ID: id,
		Duration: DefaultDuration, Clock: clock}
}

// State is the lock as seen now. It is the `lock status -o json` schema and
// part of `status -o json`: every key is always present.
type State struct {
	Namespace string `json:"namespace"`
	Cluster   string `json:"cluster"`
	Lease     string `json:"lease"`
	// Self is the lock ID this process acts as.
	Self string `json:"self"`
	// Holder is empty when nobody holds the lock.
	Holder    string `json:"holder"`
	Operation string `json:"operation"`
	Reason    string `json:"reason"`
	// Held is true when a holder is set and its lock has not expired.
	Held bool `json:"held"`
	// Mine is true when Self is the holder (expired or not).
	Mine bool `json:"mine"`
	// Expired is true when a holder is set but its lock ran out (judged by
	// the API server's clock); anyone not denied may take it over.
	Expired bool `json:"expired"`
	// HolderDenied is true when the holder is on the deny list; anyone not
	// denied may take the lock over.
	HolderDenied    bool       `json:"holderDenied"`
	Acquired        *time.Time `json:"acquired"`
	Renewed         *time.Time `json:"renewed"`
	Expires         *time.Time `json:"expires"`
	DurationSeconds int32      `json:"durationSeconds"`
	// ServerTime is the API server's time the state was judged at.
	ServerTime  time.Time    `json:"serverTime"`
	DenyList    []DenyEntry  `json:"denyList"`
	DenyHistory []DenyRecord `json:"denyHistory"`
	Journal     *ops.Journal `json:"journal"`
	// Control is the pause, continue or abort last written for the running operation (null:
	// none); the run honours it between steps.
	Control *ops.ControlRequest `json:"control"`

	// lease is the lease as read (a new one when missing: leaseMissing), for Manager.Seen.
	lease        *coordinationv1.Lease
	leaseMissing bool
}

// Acquire takes the lock for operation (see AcquireWithReason).
func (m *Manager) Acquire(ctx context.Context, operation string) (ops.HeldLock, error) {
	return m.acquire(ctx, operation, "", nil)
}

// AcquireJournal takes the lock for operation, as Acquire does, and stores the journal first
// returns in the same write (ops.JournalAcquirer). The held lock's Journal is the one found.
func (m *Manager) AcquireJournal(ctx context.Context, operation string, first func(prev *ops.Journal, holder string) (*ops.Journal, error)) (ops.HeldLock, error) {
	return m.acquire(ctx, operation, "", first)
}

// Seen hands m the lease as st, a Status of the same lock, read it: the next acquisition
// decides and writes from that copy instead of reading the lease again (a round trip less
// before a run's first step). The write carries the copy's resourceVersion, so if anyone
// changed the lease since, the API server refuses it (a conflict, or "already exists" for a
// lease that was missing) and the acquisition is decided again on a fresh read; a refusal
// decided from the copy is checked on a fresh read too.
func (m *Manager) Seen(st *State) {
	if st != nil && st.lease != nil && st.Namespace == m.Namespace && st.Cluster == m.Cluster {
		m.seen, m.seenMissing = st.lease.DeepCopy(), st.leaseMissing
	}
}

// AcquireWithReason takes the lock for operation, recording reason (the
// free text of `lock acquire --reason`). It takes a free lock, extends one
// this ID holds, takes over one that expired or whose holder is denied, and
// otherwise fails with an ops.ErrLocked error naming the holder. A denied ID
// never acquires, even when it holds the lock. A refused acquisition writes
// nothing.
func (m *Manager) AcquireWithReason(ctx context.Context, operation, reason string) (ops.HeldLock, error) {
	return m.acquire(ctx, operation, reason, nil)
}

// acquire is AcquireWithReason; with first, the same write stores the journal first returns.
func (m *Manager) acquire(ctx context.Context, operation, reason string, first func(prev *ops.Journal, holder string) (*ops.Journal, error)) (ops.HeldLock, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	var (
		action   string
		previous string
		// handReason is the reason of the hold taken by hand (lock acquire) this acquisition
		// extends.
		handReason string
		journal    *ops.Journal
	)
	seen, seenMissing := m.seen, m.seenMissing
	m.seen, m.seenMissing = nil, false
	calls, refusedFromSeen := 0, false
	mutate := func(l *coordinationv1.Lease, exists bool) (bool, error) {
		calls++
		now := m.now()
		denies, err := decodeDenyList(l)
		if err != nil {
			return false, err
		}
		if action, err = m.decide(l, denies, now); err != nil {
			refusedFromSeen = seen != nil && calls == 1
			return false, err
		}
		previous = holderOf(l)
		handReason = ""
		if action == ops.LockExtended && l.Annotations[AnnotationOperation] == ManualOperation {
			handReason = l.Annotations[AnnotationReason]
		}
		if journal, err = decodeJournal(l); err != nil {
			return false, err
		}
		m.take(l, exists, action, operation, reason, now)
		if first == nil {
			return true, nil
		}
		// decodeJournal's copy is the held lock's Journal: first gets its own.
		prev, err := decodeJournal(l)
		if err != nil {
			return false, err
		}
		j, err := first(prev, m.ID)
		if err != nil {
			return false, err
		}
		return true, encodeAnnotation(l, AnnotationJournal, j, j == nil)
	}
	var (
		lease *coordinationv1.Lease
		err   error
	)
	if seen != nil {
		// From the earlier read; a refusal decided on it is decided again on a fresh one.
		if lease, err = m.modifyFrom(ctx, seen, seenMissing, mutate); err != nil && refusedFromSeen {
			lease, err = m.modify(ctx, mutate)
		}
	} else {
		lease, err = m.modify(ctx, mutate)
	}
	if err != nil {
		return nil, m.wrap("acquiring", err)
	}
	info := m.lockInfo(lease, action)
	if action == ops.LockTakeover {
		// The documented lock event names whom a takeover replaced.
		info.Previous = previous
	}
	info.HandReason = handReason
	return &heldLock{m: m, journal: journal, info: info, lease: lease}, nil
}

// decide applies the acquisition rules to the lease as read at now.
func (m *Manager) decide(l *coordinationv1.Lease, denies []DenyEntry, now time.Time) (string, error) {
	if d := findDeny(denies, m.ID); d != nil {
		return "", m.deniedError(d)
	}
	holder := holderOf(l)
	switch {
	case holder == "":
		return ops.LockAcquired, nil
	case holder == m.ID:
		if err := m.otherSession(l, now); err != nil {
			return "", err
		}
		return ops.LockExtended, nil
	case findDeny(denies, holder) != nil:
		return ops.LockTakeover, nil
	case m.expired(l, now):
		return ops.LockTakeover, nil
	case m.Force:
		return ops.LockTakeover, nil
	}
	return "", ops.Lockedf("cluster %s is locked by %s%s until %s; wait, ask them to release it, or take it over (stopping what it does) with: kubectl dbops lock acquire %s -n %s --force",
		m.clusterName(), holder, describeWork(l), formatTime(m.expiry(l)), m.Cluster, m.Namespace)
}

// take makes the lease ours according to action.
func (m *Manager) take(l *coordinationv1.Lease, exists bool, action, operation, reason string, now time.Time) {
	nowMicro := metav1.NewMicroTime(now)
	if action != ops.LockExtended || l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &nowMicro
	}
	if action != ops.LockExtended && exists && holderOf(l) != "" {
		transitions := int32(1)
		if l.Spec.LeaseTransitions != nil {
			transitions = *l.Spec.LeaseTransitions + 1
		}
		l.Spec.LeaseTransitions = &transitions
	}
	id := m.ID
	l.Spec.HolderIdentity = &id
	l.Spec.RenewTime = &nowMicro
	seconds := m.durationSeconds()
	l.Spec.LeaseDurationSeconds = &seconds
	setAnnotation(l, AnnotationOperation, operation)
	setAnnotation(l, AnnotationSession, m.Session)
	// A pause or abort written for an earlier run is not this one's.
	delete(l.Annotations, AnnotationControl)
	// Extending keeps the reason the holder gave earlier unless a new one
	// is given; a new holder's reason replaces the old holder's.
	if reason != "" || action != ops.LockExtended {
		setAnnotation(l, AnnotationReason, reason)
	}
}

// Release gives up the lock when this ID holds it (expired or not). It is
// the `lock release` command: releasing a lock held by someone else is an
// ops.ErrLocked error (unless Force), releasing a free lock an ops.ErrPrecondition error.
// The journal and deny list stay on the Lease.
func (m *Manager) Release(ctx context.Context) error {
	_, err := m.ReleaseHolder(ctx)
	return err
}

// Released is what a release gave up.
type Released struct {
	// Holder is the ID that held the lock; Work its operation and reason (" (...)" or "").
	Holder, Work string
}

// ReleaseHolder is Release, returning whose lock it released: with Force, someone else's.
func (m *Manager) ReleaseHolder(ctx context.Context) (Released, error) {
	if err := m.validate(); err != nil {
		return Released{}, err
	}
	var r Released
	_, err := m.modify(ctx, func(l *coordinationv1.Lease, exists bool) (bool, error) {
		switch holder := holderOf(l); {
		case !exists || holder == "":
			return false, ops.Preconditionf("cluster %s is not locked; nothing to release", m.clusterName())
		case holder != m.ID && !m.Force:
			return false, ops.Lockedf("cluster %s is locked by %s%s, not by %s; only the holder can release it, or release it for them (stopping what it does) with --force",
				m.clusterName(), holder, describeWork(l), m.ID)
		default:
			r = Released{Holder: holder, Work: describeWork(l)}
		}
		clearHolder(l)
		return true, nil
	})
	return r, m.wrap("releasing", err)
}

// Status reads the lock, judging expiry by the API server's clock.
func (m *Manager) Status(ctx context.Context) (*State, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	l, err := m.get(ctx)
	missing := apierrors.IsNotFound(err)
	if missing {
		l, err = m.newLease(), nil
	}
	if err != nil {
		return nil, m.wrap("reading", err)
	}
	now := m.now()
	denies, err := decodeDenyList(l)
	if err != nil {
		return nil, m.wrap("reading", err)
	}
	history, err := decodeDenyHistory(l)
	if err != nil {
		return nil, m.wrap("reading", err)
	}
	journal, err := decodeJournal(l)
	if err != nil {
		return nil, m.wrap("reading", err)
	}
	s := &State{
		Namespace: m.Namespace, Cluster: m.Cluster, Lease: LeaseName(m.Cluster), Self: m.ID,
		ServerTime: now.UTC(), DenyList: denies, DenyHistory: history, Journal: journal, lease: l, leaseMissing: missing,
	}
	if s.DenyList == nil {
		s.DenyList = []DenyEntry{}
	}
	if s.DenyHistory == nil {
		s.DenyHistory = []DenyRecord{}
	}
	if s.Holder = holderOf(l); s.Holder == "" {
		return s, nil
	}
	if s.Control, err = decodeControl(l); err != nil {
		return nil, m.wrap("reading", err)
	}
	s.Operation = l.Annotations[AnnotationOperation]
	s.Reason = l.Annotations[AnnotationReason]
	s.Mine = s.Holder == m.ID
	s.Expired = m.expired(l, now)
	s.HolderDenied = findDeny(denies, s.Holder) != nil
	s.Held = !s.Expired
	s.Acquired = microPtr(l.Spec.AcquireTime)
	s.Renewed = microPtr(l.Spec.RenewTime)
	expires := m.expiry(l).UTC()
	s.Expires = &expires
	s.DurationSeconds = int32(m.leaseDuration(l) / time.Second)
	return s, nil
}

// modify runs a conflict-safe read-modify-write of the lease. mutate gets a
// fresh copy on every attempt, so after a conflict (or a create race) the
// decision is taken again on the new state; a missing lease is passed as a
// new object with exists false. mutate returns false to write nothing. The
// lease returned is the one written, or the one read when nothing was.
func (m *Manager) modify(ctx context.Context, mutate func(l *coordinationv1.Lease, exists bool) (bool, error)) (*coordinationv1.Lease, error) {
	return m.modifyFrom(ctx, nil, false, mutate)
}

// modifyFrom is modify starting from cached, the lease as this process last wrote or read
// it, instead of a fresh read: the write carries cached's resourceVersion, so if anyone
// changed the lease since, the API server answers 409 and the next attempt re-reads it and
// decides again. A held lock's renewals and journal saves thus cost one request, not two.
//
// cachedMissing says cached stands for a lease that did not exist when read (a new one to
// create).
func (m *Manager) modifyFrom(ctx context.Context, cached *coordinationv1.Lease, cachedMissing bool, mutate func(l *coordinationv1.Lease, exists bool) (bool, error)) (*coordinationv1.Lease, error) {
	leases := m.Client.CoordinationV1().Leases(m.Namespace)
	var out *coordinationv1.Lease
	fromCache := false
	// A write from the cache that finds the lease gone is decided again on a fresh read too.
	again := func(err error) bool { return isWriteRace(err) || (fromCache && apierrors.IsNotFound(err)) }
	err := retry.OnError(retry.DefaultRetry, again, func() error {
		var (
			l   *coordinationv1.Lease
			err error
		)
		fromCache = cached != nil
		if fromCache {
			l, cached = cached.DeepCopy(), nil
		} else {
			l, err = m.get(ctx)
		}
		exists := err == nil && !(fromCache && cachedMissing)
		switch {
		case apierrors.IsNotFound(err):
			l = m.newLease()
		case err != nil:
			return err
		}
		write, err := mutate(l, exists)
		if err != nil || !write {
			out = l
			return err
		}
		ensureLabels(l, m.Cluster)
		if exists {
			out, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		} else {
			out, err = leases.Create(ctx, l, metav1.CreateOptions{})
		}
		return err
	})
	return out, err
}

// isWriteRace reports errors that mean someone else wrote the lease between
// our read and our write.
func isWriteRace(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
}

func (m *Manager) get(ctx context.Context) (*coordinationv1.Lease, error) {
	return m.Client.CoordinationV1().Leases(m.Namespace).Get(ctx, LeaseName(m.Cluster), metav1.GetOptions{})
}

func (m *Manager) newLease() *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName(m.Cluster), Namespace: m.Namespace}}
	ensureLabels(l, m.Cluster)
	return l
}

func ensureLabels(l *coordinationv1.Lease, cluster string) {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[LabelManagedBy] = ManagedByValue
	l.Labels[LabelCluster] = cluster
}

func (m *Manager) validate() error {
	switch {
	case m.Client == nil:
		return errors.New("lock: no Kubernetes client configured")
	case m.Namespace == "" || m.Cluster == "":
		return ops.Usagef("lock: namespace and cluster name are required")
	case m.ID == "":
		return ops.Usagef("lock: the lock ID is empty; set one explicitly")
	}
	return nil
}

// wrap adds which lease an error is about, unless it is already one of the
// coded errors whose message is meant for the user as is.
func (m *Manager) wrap(verb string, err error) error {
	if err == nil {
		return nil
	}
	var coded *ops.CodedError
	if errors.As(err, &coded) {
		return err
	}
	return fmt.Errorf("%s lock %s/%s: %w", verb, m.Namespace, LeaseName(m.Cluster), err)
}

func (m *Manager) now() time.Time {
	if m.Clock == nil {
		return time.Now()
	}
	return m.Clock.Now()
}

func (m *Manager) duration() time.Duration {
	if m.Duration <= 0 {
		return DefaultDuration
	}
	return m.Duration
}

// durationSeconds rounds up so a lock never lasts shorter than asked.
func (m *Manager) durationSeconds() int32 {
	s := math.Ceil(m.duration().Seconds())
	if s > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(s)
}

// leaseDuration is the holder's own duration; it may differ from ours.
func (m *Manager) leaseDuration(l *coordinationv1.Lease) time.Duration {
	if l.Spec.LeaseDurationSeconds != nil && *l.Spec.LeaseDurationSeconds > 0 {
		return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return m.duration()
}

// expiry is the last renewal plus the holder's duration. A held lease
// without any timestamp is malformed and counts as expired.
func (m *Manager) expiry(l *coordinationv1.Lease) time.Time {
	last := l.Spec.RenewTime
	if last == nil {
		last = l.Spec.AcquireTime
	}
	if last == nil {
		return time.Time{}
	}
	return last.Add(m.leaseDuration(l))
}

func (m *Manager) expired(l *coordinationv1.Lease, now time.Time) bool {
	return m.expiry(l).Before(now)
}

func (m *Manager) lockInfo(l *coordinationv1.Lease, action string) ops.LockInfo {
	return ops.LockInfo{Action: action, Holder: holderOf(l), Operation: l.Annotations[AnnotationOperation],
		Expires: m.expiry(l).UTC()}
}

func (m *Manager) clusterName() string { return m.Namespace + "/" + m.Cluster }

func (m *Manager) deniedError(d *DenyEntry) error {
	why := ""
	if d.Reason != "" {
		why = ": " + d.Reason
	}
	return ops.WithReason(ops.Lockedf("lock ID %s is on the deny list of cluster %s (denied by %s at %s%s); it cannot take the lock until it is allowed again",
		d.ID, m.clusterName(), d.By, formatTime(d.At), why), ops.ReasonDenied)
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// clearHolder frees the lease; annotations other than the holder's
// operation and reason (deny list, history, journal) stay.
func clearHolder(l *coordinationv1.Lease) {
	l.Spec.HolderIdentity = nil
	l.Spec.AcquireTime = nil
	l.Spec.RenewTime = nil
	delete(l.Annotations, AnnotationOperation)
	delete(l.Annotations, AnnotationReason)
	delete(l.Annotations, AnnotationSession)
	delete(l.Annotations, AnnotationControl)
}

// otherSession refuses when the lease, held by this ID, belongs to another
// live process: the same user running two operations at once.
func (m *Manager) otherSession(l *coordinationv1.Lease, now time.Time) error {
	sess := l.Annotations[AnnotationSession]
	if sess == "" || sess == m.Session || m.expired(l, now) || l.Spec.RenewTime == nil {
		return nil
	}
	timeout := m.SessionTimeout
	if timeout <= 0 {
		timeout = DefaultSessionTimeout
	}
	renewed := l.Spec.RenewTime.Time
	deadAfter := renewed.Add(timeout)
	if !now.Before(deadAfter) {
		return nil // that process stopped renewing: it is gone
	}
	return ops.Lockedf("cluster %s is locked by another kubectl-dbops session of %s%s, renewed %s ago; wait for it to finish, or if that process is gone, it counts as dead in %s (at %s): retry then, or with --wait-for-lock, or release it: %s",
		m.clusterName(), m.ID, describeWork(l), now.Sub(renewed).Round(time.Second), deadAfter.Sub(now).Round(time.Second), formatTime(deadAfter), ops.ReleaseCommand(m.Namespace, m.Cluster, m.ID))
}

// describeWork renders " (operation; reason: ...)" for messages.
func describeWork(l *coordinationv1.Lease) string {
	var parts []string
	if op := l.Annotations[AnnotationOperation]; op != "" {
		parts = append(parts, op)
	}
	if r := l.Annotations[AnnotationReason]; r != "" {
		parts = append(parts, "reason: "+r)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

func setAnnotation(l *coordinationv1.Lease, key, value string) {
	if value == "" {
		delete(l.Annotations, key)
		return
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[key] = value
}

func microPtr(t *metav1.MicroTime) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }
