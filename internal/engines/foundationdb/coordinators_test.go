package foundationdb

import (
	"testing"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// dnsStatus is status json of a cluster whose cluster file names its coordinators by DNS name
// (the operator's spec.routing.useDNSInClusterFile: <pod>.<cluster>.<namespace>.svc.cluster.local,
// internal/pod_models.go GetPodDNSName): client.coordinators lists the hostnames as the cluster
// file has them (fdbclient/MonitorLeader.cpp getAddressString), and the processes they resolve
// to hold the coordinator role (fdbserver Status.actor.cpp addCoordinatorRole).
const dnsStatus = `{"client":{"coordinators":{"quorum_reachable":true,"coordinators":[
  {"address":"myfdb-storage-10.myfdb.demo.svc.cluster.local:4501","reachable":true},
  {"address":"myfdb-storage-11.myfdb.demo.svc.cluster.local:4501","reachable":true},
  {"address":"myfdb-log-10.myfdb.demo.svc.cluster.local:4501","reachable":true}]},
  "database_status":{"available":true,"healthy":true}},
 "cluster":{"connection_string":"myfdb:abc@myfdb-storage-10.myfdb.demo.svc.cluster.local:4501,myfdb-storage-11.myfdb.demo.svc.cluster.local:4501,myfdb-log-10.myfdb.demo.svc.cluster.local:4501",
  "processes":{
   "a":{"address":"10.0.0.1:4501","class_type":"storage","locality":{"instance_id":"storage-10","zoneid":"zone-a"},"roles":[{"role":"storage"},{"role":"coordinator"}]},
   "b":{"address":"10.0.0.2:4501","class_type":"storage","locality":{"instance_id":"storage-11","zoneid":"zone-b"},"roles":[{"role":"storage"},{"role":"coordinator"}]},
   "c":{"address":"10.0.0.3:4501","class_type":"storage","locality":{"instance_id":"storage-12","zoneid":"zone-c"},"roles":[{"role":"storage"}]},
   "d":{"address":"10.0.1.1:4501","class_type":"log","locality":{"instance_id":"log-10","zoneid":"zone-a"},"roles":[{"role":"log"},{"role":"coordinator"}]}}}}`

// TestCoordinatorsByRoleWithDNSClusterFile: with DNS names in the cluster file the COORDINATOR
// column and the coordinator count of a batch (the --method pod majority guard) come from the
// coordinator role, not from matching IPs against client.coordinators.
func TestCoordinatorsByRoleWithDNSClusterFile(t *testing.T) {
	st, err := ParseStatus([]byte(dnsStatus))
	if err != nil {
		t.Fatal(err)
	}
	c := &ops.Cluster{Name: "myfdb", Namespace: "demo"}
	var pods []ops.Pod
	for _, m := range []struct{ class, id string }{{"storage", "storage-10"}, {"storage", "storage-11"}, {"storage", "storage-12"}, {"log", "log-10"}} {
		p := ops.Pod{Name: "myfdb-" + m.id, Member: m.id, Group: m.class, Ready: true}
		pods = append(pods, p)
		g := c.Group(m.class)
		if g == nil {
			g = &ops.NodeGroup{Name: m.class}
			c.Groups = append(c.Groups, g)
		}
		g.Pods = append(g.Pods, p)
	}
	want := map[string]string{"myfdb-storage-10": "yes", "myfdb-storage-11": "yes", "myfdb-storage-12": "no", "myfdb-log-10": "yes"}
	for _, row := range processTable(c, st, nil).Rows {
		if row[5] != want[row[0]] {
			t.Fatalf("COORDINATOR of %s is %s, want %s", row[0], row[5], want[row[0]])
		}
	}
	g := &gate{}
	b := g.batch(st, pods[:2])
	if n := len(st.Client.Coordinators.Coordinators); b.coords != 2 || n-b.coords > n/2 {
		t.Fatalf("batch storage-10,storage-11 holds %d of %d coordinators, want 2 (no majority left)", b.coords, n)
	}
	if b := g.batch(st, pods[2:3]); b.coords != 0 {
		t.Fatalf("storage-12 counted %d coordinators", b.coords)
	}
}
