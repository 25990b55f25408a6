package cratedb

import (
	"fmt"
	"strconv"
	"strings"
)

// version is a CrateDB release, read from sys.nodes' version['number']
// (e.g. "5.10.1", "4.8.4-SNAPSHOT").
type version struct {
	major, minor, patch int
	raw                 string
}

func parseVersion(s string) (version, bool) {
	v := version{raw: strings.TrimSpace(s)}
	num, _, _ := strings.Cut(v.raw, "-")
	parts := strings.Split(num, ".")
	if len(parts) < 2 {
		return v, false
	}
	var nums [3]int
	for i := 0; i < len(parts) && i < 3; i++ {
		n, err := strconv.Atoi(parts[i])
		if err != nil || n < 0 {
			return v, false
		}
		nums[i] = n
	}
	v.major, v.minor, v.patch = nums[0], nums[1], nums[2]
	return v, true
}

func (v version) known() bool { return v.raw != "" && (v.major > 0 || v.minor > 0) }

// atLeast reports v >= major.minor.
func (v version) atLeast(major, minor int) bool {
	return v.major > major || v.major == major && v.minor >= minor
}

func (v version) String() string {
	if !v.known() {
		return "unknown"
	}
	return v.raw
}

// Version thresholds, from CrateDB's release notes (docs/procedures.md, CrateDB).
var (
	// SET LICENSE was removed in 5.3 (no enterprise license any more).
	noLicenseFrom = version{major: 5, minor: 3}
	// gateway.expected_data_nodes / recover_after_data_nodes replace
	// expected_nodes / recover_after_nodes from 4.7.
	dataNodeSettingsFrom = version{major: 4, minor: 7}
)

// clusterVersion is the lowest version among the nodes (a cluster in a
// rolling upgrade acts like its oldest node); unknown when no row has a
// parsable one.
func clusterVersion(rows []nodeRow) (version, error) {
	var low version
	for _, r := range rows {
		v, ok := parseVersion(r.Version)
		if !ok {
			if r.Version != "" {
				return version{}, fmt.Errorf("node %s reports an unparsable version %q", r.Name, r.Version)
			}
			continue
		}
		if !low.known() || !v.atLeast(low.major, low.minor) || (v.major == low.major && v.minor == low.minor && v.patch < low.patch) {
			low = v
		}
	}
	return low, nil
}
