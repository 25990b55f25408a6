// Command realnodecheck prints one line saying whether this machine can run the test bed's
// real kubelet nodes, and if not why, so that `make e2e` shows the reason its TestRealNode…
// tests are skipped. It exits 0 on a machine without real nodes (which still runs the rest of
// the e2e suite), but 1 where they are required (CI=true or DBOPS_REQUIRE_REAL_NODES=1,
// testbed.RealNodesRequired): there those tests fail with the same reason.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/test/testbed"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := testbed.RealNodeSupport(ctx, false); err != nil {
		if testbed.RealNodesRequired() {
			fmt.Printf("real nodes unavailable, and required (CI=true or DBOPS_REQUIRE_REAL_NODES=1): the real-node e2e tests will fail: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("real-node e2e tests will be skipped: %v\n", err)
		return
	}
	fmt.Println("real nodes: available (the TestRealNode… e2e tests run on kubelet + containerd)")
}
