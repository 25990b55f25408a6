// Command realnodecheck prints one line saying whether this machine can run the test bed's
// real kubelet nodes, and if not why, so that `make e2e` shows the reason its TestRealNode…
// tests are skipped (go test hides the skip messages of a passing package). It always exits 0:
// a machine without real nodes still runs the rest of the e2e suite.
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/kubectl-dbops/kubectl-dbops/internal/testbed"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := testbed.RealNodeSupport(ctx, false); err != nil {
		fmt.Printf("real-node e2e tests will be skipped: %v\n", err)
		return
	}
	fmt.Println("real nodes: available (the TestRealNode… e2e tests run on kubelet + containerd)")
}
