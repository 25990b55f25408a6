package foundationdb

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// maxPollFactor bounds the backoff of a wait: status json is read at most every
// maxPollFactor poll intervals (8 s by default) while nothing changes.
const maxPollFactor = 8

// backoff spaces the reads of one wait. FoundationDB has no watch for status json, so a wait
// reads it again: after the poll interval, doubling while what it waits for stays the same,
// up to maxPollFactor intervals; a change (a new reason) starts again at the interval, so a
// wait that is moving is followed closely and one that is stuck costs few fdbcli runs.
type backoff struct {
	base, cur time.Duration
	last      string
	started   bool
}

// next is how long to wait before the next read, given what the last read is still waiting for.
func (b *backoff) next(reason string) time.Duration {
	switch {
	case !b.started || reason != b.last:
		b.cur = b.base
	case b.cur < maxPollFactor*b.base:
		b.cur *= 2
		if b.cur > maxPollFactor*b.base {
			b.cur = maxPollFactor * b.base
		}
	}
	b.started, b.last = true, reason
	return b.cur
}

// after is time.After, or the engine's test hook.
func (e *Engine) after(d time.Duration) <-chan time.Time {
	if e.afterFunc != nil {
		return e.afterFunc(d)
	}
	return time.After(d)
}

// watchCR watches the FoundationDBCluster name so that a wait on it wakes when it changes
// rather than on its next read; the returned channel is nil when no watch could be started
// (the wait then reads on its backoff alone), and stop ends the watch.
func (e *Engine) watchCR(ctx context.Context, namespace, name string) (<-chan watch.Event, func()) {
	if e.deps.Dynamic == nil {
		return nil, func() {}
	}
	w, err := e.deps.Dynamic.Resource(ClusterGVR).Namespace(namespace).Watch(ctx,
		metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return nil, func() {}
	}
	return w.ResultChan(), w.Stop
}
