package etcd

import (
	"os"
	"testing"
)

// TestEtcdctlJSONAsEtcdDocumentsIt parses the `-w json` outputs etcd's own etcdctl/README.md
// shows (testdata/upstream/README.md): an oracle independent of our etcd fixtures. Member IDs
// come as decimal uint64 and are used in hex (8211f1d0f64f3269 is the README's infra1).
func TestEtcdctlJSONAsEtcdDocumentsIt(t *testing.T) {
	b, err := os.ReadFile("testdata/upstream/readme-member-list.json")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := ParseMemberList(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []Member{
		{ID: "8211f1d0f64f3269", Name: "infra1", PeerURLs: []string{"http://127.0.0.1:12380"}, ClientURLs: []string{"http://127.0.0.1:2379"}},
		{ID: "91bc3c398fb3c146", Name: "infra2", PeerURLs: []string{"http://127.0.0.1:22380"}, ClientURLs: []string{"http://127.0.0.1:22379"}},
		{ID: "fd422379fda50e48", Name: "infra3", PeerURLs: []string{"http://127.0.0.1:32380"}, ClientURLs: []string{"http://127.0.0.1:32379"}},
	}
	if len(ms) != len(want) {
		t.Fatalf("members %+v", ms)
	}
	for i := range want {
		m, w := ms[i], want[i]
		if m.ID != w.ID || m.Name != w.Name || m.Learner || len(m.PeerURLs) != 1 || m.PeerURLs[0] != w.PeerURLs[0] ||
			len(m.ClientURLs) != 1 || m.ClientURLs[0] != w.ClientURLs[0] {
			t.Errorf("member %d: %+v, want %+v", i, m, w)
		}
	}

	b, err = os.ReadFile("testdata/upstream/readme-endpoint-status.json")
	if err != nil {
		t.Fatal(err)
	}
	es, err := ParseEndpointStatus(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 {
		t.Fatalf("endpoint status %+v", es)
	}
	e := es[0]
	if e.Endpoint != "127.0.0.1:2379" || e.MemberID != "8211f1d0f64f3269" || e.Leader != "fd422379fda50e48" ||
		e.RaftTerm != 2 || e.RaftIndex != 32623 || e.Revision != 2 || e.Version != "3.0.0" || e.Learner || len(e.Errors) != 0 {
		t.Errorf("endpoint status %+v", e)
	}
}
