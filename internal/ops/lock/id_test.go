package lock

import (
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestDefaultID(t *testing.T) {
	tests := []struct {
		user, server, want string
	}{
		{"alice", "https://api.example:6443", "alice@api.example:6443"},
		{"alice", "https://api.example:6443/k8s/clusters/c-1", "alice@api.example:6443"},
		{"alice", "https://api.example", "alice@api.example"},
		{"alice", "api.example:6443", "alice@api.example:6443"},
		{"alice", "http://127.0.0.1:8080", "alice@127.0.0.1:8080"},
		{"alice", "https://[::1]:6443", "alice@[::1]:6443"},
		{"arn:aws:eks:eu-west-1:1:cluster/prod", "https://ABC.gr7.eu-west-1.eks.amazonaws.com",
			"arn:aws:eks:eu-west-1:1:cluster/prod@ABC.gr7.eu-west-1.eks.amazonaws.com"},
		{" alice ", " https://api.example:6443 ", "alice@api.example:6443"},
		{"", "https://api.example:6443", "anonymous@api.example:6443"},
		{"alice", "", "alice"},
	}
	for _, tc := range tests {
		if got := DefaultID(tc.user, tc.server); got != tc.want {
			t.Errorf("DefaultID(%q, %q) = %q, want %q", tc.user, tc.server, got, tc.want)
		}
	}
}

func TestIDFromKubeconfig(t *testing.T) {
	cfg := clientcmdapi.Config{
		CurrentContext: "prod",
		Contexts: map[string]*clientcmdapi.Context{
			"prod":    {Cluster: "prod-cluster", AuthInfo: "alice"},
			"staging": {Cluster: "staging-cluster", AuthInfo: "bob"},
			"broken":  {Cluster: "missing", AuthInfo: "carol"},
			"ro":      {Cluster: "prod-cluster", AuthInfo: "admin-as-dave"},
		},
		// A kubeconfig user whose requests impersonate dave (as: dave): dave is the person.
		AuthInfos: map[string]*clientcmdapi.AuthInfo{"admin-as-dave": {Token: "t", Impersonate: "dave"}},
		Clusters: map[string]*clientcmdapi.Cluster{
			"prod-cluster":    {Server: "https://api.prod.example:6443"},
			"staging-cluster": {Server: "https://api.staging.example"},
		},
	}
	tests := []struct {
		context, want string
		wantErr       bool
	}{
		{"", "alice@api.prod.example:6443", false},
		{"staging", "bob@api.staging.example", false},
		{"broken", "carol", false},
		{"ro", "dave@api.prod.example:6443", false},
		{"nope", "", true},
	}
	for _, tc := range tests {
		got, err := IDFromKubeconfig(cfg, tc.context, "")
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("IDFromKubeconfig(%q) = %q, %v; want %q (error %v)", tc.context, got, err, tc.want, tc.wantErr)
		}
	}
	if _, err := IDFromKubeconfig(clientcmdapi.Config{}, "", ""); err == nil {
		t.Error("empty kubeconfig: want error")
	}
}
