package ops

import (
	"fmt"
	"testing"
)

func TestAllowed(t *testing.T) {
	var many []string
	for i := range 300 {
		many = append(many, fmt.Sprintf("storage-%d", i))
	}
	tests := []struct {
		name    string
		unknown string
		allowed []string
		want    string
	}{
		{"short list, no near name", "zzz", []string{"a-0", "a-1"}, "allowed: a-0, a-1"},
		{"short list, a typo", "db-hot-7", []string{"db-master-0", "db-hot-0", "db-hot-1"}, `did you mean "db-hot-0" or "db-hot-1"? allowed: db-master-0, db-hot-0, db-hot-1`},
		{"duplicates listed once", "x", []string{"a", "a", "b"}, "allowed: a, b"},
		{"large list capped", "log-1", many, "allowed (300): storage-0, storage-1, storage-2, storage-3, storage-4, storage-5, storage-6, storage-7, storage-8, storage-9, ... and 290 more"},
		{"large list, closest first", "storage-2991", many, `did you mean "storage-291" or "storage-299" or "storage-21"? allowed (300): storage-0,`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Allowed(tt.unknown, tt.allowed)
			if len(got) < len(tt.want) || got[:len(tt.want)] != tt.want {
				t.Fatalf("Allowed(%q) = %q, want it to start with %q", tt.unknown, got, tt.want)
			}
		})
	}
}
