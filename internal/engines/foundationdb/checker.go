package foundationdb

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// defaultLockPrefix is where the FoundationDB operator keeps its lock and maintenance keys when
// spec.lockOptions.lockKeyPrefix is empty (the operator's GetLockPrefix).
const defaultLockPrefix = "\xff\x02/org.foundationdb.kubernetes-operator"

// checker is the operator's maintenance-mode checker as a FoundationDBCluster configures it.
// When on (spec.automationOptions.maintenanceModeOptions.UseMaintenanceModeChecker or
// resetMaintenanceMode), the operator switches maintenance off as soon as no storage process
// listed under <lock prefix>/maintenance/ still waits for its restart — at once for a zone
// whose processes nobody listed. So a run lists its batch's storage process groups there, with
// the maintenance start as the operator itself writes it (an 8-byte little-endian unix time),
// in the same fdbcli session that sets the zone; the operator then clears the zone once they
// restarted, and removes the entries.
type checker struct {
	on     bool
	prefix string // the maintenance key prefix, with its trailing slash
	// seconds is how long a batch's maintenance zone lasts if the run dies: the cluster's
	// spec.automationOptions.maintenanceModeOptions.maintenanceModeTimeSeconds, 600 s unset
	// (the operator's GetMaintenaceModeTimeoutSeconds, which its update_pods.go passes to
	// `maintenance on`). A value below 1 would end the zone at once, so it counts as unset.
	seconds int64
}

func readChecker(u *unstructured.Unstructured) checker {
	if u == nil {
		return checker{seconds: maintenanceSeconds}
	}
	seconds := int64(maintenanceSeconds)
	if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "automationOptions", "maintenanceModeOptions", "maintenanceModeTimeSeconds"); ok {
		if n := int64Of(v); n > 0 {
			seconds = n
		}
	}
	use, _, _ := unstructured.NestedBool(u.Object, "spec", "automationOptions", "maintenanceModeOptions", "UseMaintenanceModeChecker")
	reset, _, _ := unstructured.NestedBool(u.Object, "spec", "automationOptions", "maintenanceModeOptions", "resetMaintenanceMode")
	prefix, _, _ := unstructured.NestedString(u.Object, "spec", "lockOptions", "lockKeyPrefix")
	if prefix == "" {
		prefix = defaultLockPrefix
	}
	return checker{on: use || reset, prefix: prefix + "/maintenance/", seconds: seconds}
}

// maintenanceOn is the fdbcli line that puts zone into maintenance; with the checker on it
// first lists groups as under maintenance since at (zero at: the plan's placeholder).
func (k checker) maintenanceOn(zone string, groups []string, at time.Time) string {
	on := fmt.Sprintf("maintenance on %s %d", zone, k.seconds)
	if !k.on || len(groups) == 0 {
		return on
	}
	val := "<start:int64le>"
	if !at.IsZero() {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(at.Unix()))
		val = escapeToken(string(b[:]))
	}
	parts := []string{"option on ACCESS_SYSTEM_KEYS", "writemode on"}
	for _, g := range groups {
		parts = append(parts, "set "+escapeToken(k.prefix+g)+" "+val)
	}
	return strings.Join(append(parts, on), "; ")
}

// escapeToken writes s as one fdbcli token: bytes other than letters, digits and -._/: as
// \xHH, which fdbcli's parser turns back into the byte.
func escapeToken(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.IndexByte("-._/:", c) >= 0:
			sb.WriteByte(c)
		default:
			fmt.Fprintf(&sb, `\x%02x`, c)
		}
	}
	return sb.String()
}

// maintenanceOff is the fdbcli line that ends this run's zone; with the checker on it also
// clears the batch's entries (the operator drops entries of restarted processes itself, but
// only when its clock puts their restart after the entry's time: a client clock ahead of the
// cluster's would leave them for its 4-hour stale period).
func (k checker) maintenanceOff(groups []string) string {
	if !k.on || len(groups) == 0 {
		return "maintenance off"
	}
	parts := []string{"option on ACCESS_SYSTEM_KEYS", "writemode on"}
	for _, g := range groups {
		parts = append(parts, "clear "+escapeToken(k.prefix+g))
	}
	return strings.Join(append(parts, "maintenance off"), "; ")
}
