package etcd

import (
	"strings"
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Each bad etcd flag value is a usage error naming it.
func TestFlagsValidate(t *testing.T) {
	base := Flags{Options: Options{Cert: "/c/client.crt", Key: "/c/client.key", AuthSecret: "etcd-root/pw"}}
	if err := base.Validate(nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		set  func(*Flags)
		want string
	}{
		{func(o *Flags) { o.AuthSecret = "a/" }, "NAME or NAME/KEY"},
		{func(o *Flags) { o.Key = "" }, "go together"},
		{func(o *Flags) { o.User = "a:b" }, "must not contain ':'"},
		{func(o *Flags) { o.PeerURLTemplate = "{{.Nope" }, "invalid etcd peer URL template"},
		{func(o *Flags) { o.PollInterval = -1 }, "must not be negative"},
	} {
		o := base
		tc.set(&o)
		if err := o.Validate(nil); ops.ExitCode(err) != ops.ExitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want usage error with %q", err, tc.want)
		}
	}
}
