package tui

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// JSON writes each event as one line of JSON (NDJSON), exactly as ops.Event's
// tags define it: that is the documented machine schema, so nothing is added,
// renamed or dropped here. It is safe for concurrent use.
type JSON struct {
	mu  sync.Mutex
	w   io.Writer
	buf bytes.Buffer
	enc *json.Encoder
	err error
}

var _ ops.Sink = (*JSON)(nil)

// NewJSON returns an NDJSON printer writing to w.
func NewJSON(w io.Writer) *JSON {
	j := &JSON{w: w}
	j.enc = json.NewEncoder(&j.buf)
	// Plan details carry SQL and shell snippets; keep "<", ">" and "&"
	// readable. The output is equally valid JSON either way.
	j.enc.SetEscapeHTML(false)
	return j
}

// Emit writes e as one line.
func (j *JSON) Emit(e ops.Event) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return
	}
	// The value and its newline go out in one Write call, so a line is
	// never split between events.
	j.buf.Reset()
	if j.err = j.enc.Encode(e); j.err != nil {
		return
	}
	_, j.err = j.w.Write(ops.JSONPrintable(j.buf.Bytes()))
}

// Err returns the first encoding or write error; later events are dropped
// after one.
func (j *JSON) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}
