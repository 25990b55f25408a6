package foundationdb

import (
	"reflect"
	"testing"
)

func TestWithEntryFlipsOrAddsNeverRemoves(t *testing.T) {
	other := map[string]any{"id": "dc1"}
	for _, tc := range []struct {
		name    string
		list    []any
		allow   bool
		want    []any
		changed bool
	}{
		{"add to empty", nil, false, []any{map[string]any{"id": "dc2"}}, true},
		{"deny again", []any{other, map[string]any{"id": "dc2"}}, false, []any{other, map[string]any{"id": "dc2"}}, false},
		{"allow flips in place", []any{map[string]any{"id": "dc2"}, other}, true, []any{map[string]any{"id": "dc2", "allow": true}, other}, true},
		{"allow a new ID adds it", []any{other}, true, []any{other, map[string]any{"id": "dc2", "allow": true}}, true},
		{"deny an allowed ID", []any{map[string]any{"id": "dc2", "allow": true}}, false, []any{map[string]any{"id": "dc2"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := withEntry(tc.list, "dc2", tc.allow)
			if changed != tc.changed || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v changed %v, want %v changed %v", got, changed, tc.want, tc.changed)
			}
		})
	}
}
