package fdbop

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// CRD is the FoundationDBCluster CRD of the test bed (crd.yaml).
//
//go:embed crd.yaml
var CRD []byte

var gvrCRD = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRD creates the CRD (if absent) and waits until it is established.
func InstallCRD(ctx context.Context, dyn dynamic.Interface) error {
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(CRD, &obj.Object); err != nil {
		return fmt.Errorf("decode FoundationDBCluster CRD: %w", err)
	}
	if _, err := dyn.Resource(gvrCRD).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create FoundationDBCluster CRD: %w", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		crd, err := dyn.Resource(gvrCRD).Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // transient until the CRD is stored
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the FoundationDBCluster CRD: %w", err)
	}
	return nil
}
