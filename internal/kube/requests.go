package kube

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// RequestCounter counts the API requests a client sends, by verb and resource ("list pods",
// "update leases", "create selfsubjectaccessreviews"), so users and tests see what an
// operation costs. Install it with rest.Config.Wrap(counter.WrapTransport).
type RequestCounter struct {
	mu     sync.Mutex
	counts map[string]int
	total  int
}

// WrapTransport wraps rt so that every request is counted as it is sent.
func (c *RequestCounter) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return countingTransport{next: rt, c: c}
}

type countingTransport struct {
	next http.RoundTripper
	c    *RequestCounter
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.c.add(RequestKey(r))
	return t.next.RoundTrip(r)
}

func (c *RequestCounter) add(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[key]++
	c.total++
}

// Total is the number of requests counted so far.
func (c *RequestCounter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Snapshot returns the counts so far by "verb resource", plus "total".
func (c *RequestCounter) Snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts)+1)
	for k, n := range c.counts {
		out[k] = n
	}
	out["total"] = c.total
	return out
}

// String renders a snapshot on one line, in a stable order: "total 12: create events=3, ...".
func (c *RequestCounter) String() string {
	snap := c.Snapshot()
	keys := make([]string, 0, len(snap))
	for k := range snap {
		if k != "total" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("total ")
	b.WriteString(strconv.Itoa(snap["total"]))
	for i, k := range keys {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(k + "=" + strconv.Itoa(snap[k]))
	}
	return b.String()
}

// RequestKey names a request by its Kubernetes verb and resource, from its method and path:
// GET of a collection is "list", with ?watch=true "watch"; POST "create", PUT "update";
// a subresource is "resource/subresource"; non-resource paths are kept as they are.
func RequestKey(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// /api/v1/... or /apis/GROUP/VERSION/...
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return strings.ToLower(r.Method) + " " + r.URL.Path
	}
	if len(rest) >= 2 && rest[0] == "namespaces" && len(rest) > 2 {
		rest = rest[2:]
	}
	if len(rest) == 0 {
		return strings.ToLower(r.Method) + " " + r.URL.Path
	}
	resource, named := rest[0], len(rest) >= 2
	if len(rest) >= 3 {
		resource += "/" + rest[2]
	}
	q := r.URL.Query()
	verb := strings.ToLower(r.Method)
	switch r.Method {
	case http.MethodGet:
		switch {
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodDelete:
		if !named {
			verb = "deletecollection"
		}
	}
	return verb + " " + resource
}
