package fleet

import "sync"

// Pool builds one value per kubeconfig context (its API clients), lazily, once, and safely
// from many goroutines: a fleet of 60 clusters in 3 contexts makes 3 clients, each when its
// first target needs it.
type Pool[T any] struct {
	// Build makes the value of one context.
	Build func(context string) (T, error)

	mu sync.Mutex
	m  map[string]*poolEntry[T]
}

type poolEntry[T any] struct {
	once sync.Once
	v    T
	err  error
}

// Get returns the value of context, building it on first use (a failed build is not retried:
// the same error is returned to every target of the context).
func (p *Pool[T]) Get(context string) (T, error) {
	p.mu.Lock()
	if p.m == nil {
		p.m = map[string]*poolEntry[T]{}
	}
	e := p.m[context]
	if e == nil {
		e = &poolEntry[T]{}
		p.m[context] = e
	}
	p.mu.Unlock()
	e.once.Do(func() { e.v, e.err = p.Build(context) })
	return e.v, e.err
}
