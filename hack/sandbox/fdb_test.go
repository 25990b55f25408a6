package main

import (
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestFDBDemoClusters: the sandbox runs a TLS FoundationDBCluster (enableTls, as the operator
// spells it) beside the others, and every demo cluster is named in the usage and the README.
func TestFDBDemoClusters(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	tls := 0
	seen := map[string]bool{}
	for _, s := range fdbDemoSpecs() {
		if seen[s.Name] {
			t.Fatalf("demo cluster %s twice", s.Name)
		}
		seen[s.Name] = true
		on, _, err := unstructured.NestedBool(s.Object().Object, "spec", "mainContainer", "enableTls")
		if err != nil {
			t.Fatal(err)
		}
		if on {
			tls++
		}
		if !strings.Contains(usage, s.Namespace+"/"+s.Name) {
			t.Errorf("usage does not name demo cluster %s/%s", s.Namespace, s.Name)
		}
		if !strings.Contains(string(readme), "`"+s.Name+"`") && !strings.Contains(string(readme), s.Namespace+"/"+s.Name) {
			t.Errorf("README.md does not name demo cluster %s", s.Name)
		}
	}
	if tls != 1 {
		t.Errorf("%d demo clusters with spec.mainContainer.enableTls, want 1", tls)
	}
}
