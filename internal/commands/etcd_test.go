package commands

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Every etcd engine option is reachable from a config key (and so from its
// flag and DBOPS_* variable): a new Options field without a flag fails here.
func TestEtcdOptionsReachable(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	body := `etcd-container: etcd
etcd-endpoint: https://127.0.0.1:2379
etcd-cacert: /c/ca.crt
etcd-cert: /c/client.crt
etcd-key: /c/client.key
etcd-auth-secret: etcd-root/pw
etcd-user: admin
etcd-peer-url-template: "https://{{.Pod}}.{{.Service}}:2380"
etcd-cluster-state-configmap: state
etcd-poll-interval: 2s
etcd-max-lag: 50
`
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	g := NewGlobalOptions(genericiooptions.NewTestIOStreamsDiscard())
	g.Getenv = func(k string) string {
		if k == "DBOPS_ETCD_MAX_LAG" {
			return "70" // env beats the config file
		}
		return ""
	}
	g.ConfigFile = cfg
	cmd := &cobra.Command{Use: "x"}
	g.etcdFlags().AddFlags("restart", cmd.Flags())
	if err := g.LoadConfig(cmd); err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(g.etcdFlags().Options)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("etcd option %s is not reached by any config key", v.Type().Field(i).Name)
		}
	}
	if g.etcdFlags().MaxLag != 70 || g.etcdFlags().AuthSecret != "etcd-root/pw" {
		t.Errorf("max lag %d, auth secret %q", g.etcdFlags().MaxLag, g.etcdFlags().AuthSecret)
	}
	if err := g.etcdFlags().Validate(g.flagGiven); err != nil {
		t.Fatal(err)
	}
}
