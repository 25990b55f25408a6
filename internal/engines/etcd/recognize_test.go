package etcd

import "testing"

func TestImageRepo(t *testing.T) {
	for image, want := range map[string]string{
		"etcd":                                 "etcd",
		"bitnami/etcd:3.5":                     "etcd",
		"registry.k8s.io/etcd:3.5.9-0":         "etcd",
		"localhost:5000/etcd@sha256:abc":       "etcd",
		"gcr.io/etcd-development/etcd:v3.5.17": "etcd",
		"docker.io/library/postgres:16":        "postgres",
		"localhost:5000/team/etcd-wrapper:1":   "etcd-wrapper",
	} {
		if got := imageRepo(image); got != want {
			t.Errorf("imageRepo(%q) = %q, want %q", image, got, want)
		}
	}
}
