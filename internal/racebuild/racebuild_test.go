package racebuild

import (
	"slices"
	"testing"
)

func TestBuildFlagsFollowTheBinary(t *testing.T) {
	got := BuildFlags()
	if Enabled != slices.Contains(got, "-race") {
		t.Fatalf("Enabled=%v but BuildFlags()=%v", Enabled, got)
	}
}
