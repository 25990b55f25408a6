package etcd

import (
	"context"
	"testing"
	"time"
)

// testCtx bounds a test's run of a plan: with a safety check removed, a step may wait for a
// state the fake never reaches, and the test must then fail within seconds instead of hanging
// until go test's timeout (TestBatchRestartRefusedWithoutQuorum did, its quorum check removed).
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
