package testbed

import "os"

// RealNodesRequired reports whether a machine that cannot run real nodes must fail the
// real-node tests instead of skipping them: under CI (CI=true, as .ci/run and hosted runners
// set it) or when DBOPS_REQUIRE_REAL_NODES=1. A developer's machine without root or cgroup v1
// still runs the rest of the e2e suite.
func RealNodesRequired() bool {
	return os.Getenv("CI") == "true" || os.Getenv("DBOPS_REQUIRE_REAL_NODES") == "1"
}
