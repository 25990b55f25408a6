package kube

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestDeletePVC(t *testing.T) {
	gr := corev1.Resource("persistentvolumeclaims")
	cases := []struct {
		name    string
		uid     types.UID
		answer  error // what the API server answers; nil: deleted
		wantErr bool
	}{
		{name: "deleted", uid: "u1"},
		{name: "already gone", uid: "u1", answer: apierrors.NewNotFound(gr, "data-web-0")},
		{name: "replaced by a new claim", uid: "u1", answer: apierrors.NewConflict(gr, "data-web-0", errors.New("UID precondition"))},
		{name: "conflict without a UID to explain it", answer: apierrors.NewConflict(gr, "data-web-0", errors.New("?")), wantErr: true},
		{name: "forbidden", uid: "u1", answer: apierrors.NewForbidden(gr, "data-web-0", errors.New("no")), wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			var got *metav1.Preconditions
			client.PrependReactor("delete", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
				got = a.(k8stesting.DeleteAction).GetDeleteOptions().Preconditions
				return true, nil, tc.answer
			})
			err := DeletePVC(context.Background(), client, "db", "data-web-0", tc.uid)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.uid != "" && (got == nil || got.UID == nil || *got.UID != tc.uid) {
				t.Errorf("delete sent preconditions %+v, want UID %s", got, tc.uid)
			}
		})
	}
}

func TestPodOrdinal(t *testing.T) {
	cases := []struct {
		sts, pod string
		want     int
	}{
		{"web", "web-0", 0},
		{"web", "web-12", 12},
		{"web", "web-db-1", -1},
		{"web-db", "web-db-1", 1},
		{"web", "web-01", -1},
		{"web", "web--1", -1},
		{"web", "web-+1", -1},
		{"web", "web-", -1},
		{"web", "other-1", -1},
	}
	for _, tc := range cases {
		if got := PodOrdinal(tc.sts, tc.pod); got != tc.want {
			t.Errorf("PodOrdinal(%q, %q) = %d, want %d", tc.sts, tc.pod, got, tc.want)
		}
	}
}
