package tui

import (
	"bufio"
	"bytes"
	"encoding/json"
	"reflect"
	"sync"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

func TestJSONGolden(t *testing.T) {
	var buf bytes.Buffer
	j := NewJSON(&buf)
	for _, e := range fixtureEvents() {
		j.Emit(e)
	}
	if err := j.Err(); err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "events.ndjson.golden", buf.Bytes())
}

// TestJSONRoundTrip checks the schema carries every event losslessly: a
// consumer decoding into ops.Event gets back what was emitted.
func TestJSONRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	j := NewJSON(&buf)
	events := fixtureEvents()
	for _, e := range events {
		j.Emit(e)
	}
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 1<<20)
	var i int
	for ; sc.Scan(); i++ {
		var got ops.Event
		if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if i >= len(events) {
			t.Fatalf("more lines than events")
		}
		want := events[i]
		// Times round-trip as equal instants, not identical structs.
		if !got.Time.Equal(want.Time) {
			t.Errorf("line %d: time %v, want %v", i+1, got.Time, want.Time)
		}
		got.Time = want.Time
		if got.Lock != nil && want.Lock != nil && got.Lock.Expires.Equal(want.Lock.Expires) {
			got.Lock.Expires = want.Lock.Expires
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("line %d:\n got %+v\nwant %+v", i+1, got, want)
		}
	}
	if i != len(events) {
		t.Errorf("got %d lines, want %d", i, len(events))
	}
}

func TestJSONConcurrentLinesStayWhole(t *testing.T) {
	var buf bytes.Buffer
	j := NewJSON(&buf)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				j.Emit(ops.Event{Type: ops.EventPods, Pods: fixturePods("crate-data-0")})
			}
		})
	}
	wg.Wait()
	sc := bufio.NewScanner(&buf)
	n := 0
	for ; sc.Scan(); n++ {
		if !json.Valid(sc.Bytes()) {
			t.Fatalf("line %d is not valid JSON: %s", n+1, sc.Bytes())
		}
	}
	if n != 400 {
		t.Errorf("got %d lines, want 400", n)
	}
}
