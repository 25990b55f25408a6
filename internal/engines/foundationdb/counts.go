package foundationdb

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ProcessCounts is the number of process groups per class the operator runs for a
// FoundationDBCluster (obj is the resource's object), as the operator reads spec.processCounts:
// a class left unset or 0 gets the operator's default for the redundancy mode and role counts,
// -1 means none (the operator's GetProcessCountsWithDefaults followed by ProcessCounts.Map, in
// api/v1beta2). Only classes with a positive count are returned.
func ProcessCounts(obj map[string]any) map[string]int {
	spec, _, _ := unstructured.NestedMap(obj, "spec")
	raw, _, _ := unstructured.NestedMap(spec, "processCounts")
	counts := map[string]int{}
	for k, v := range raw {
		counts[k] = int(int64Of(v))
	}
	db, _, _ := unstructured.NestedMap(spec, "databaseConfiguration")
	num := func(m map[string]any, k string) int { return int(int64Of(m[k])) }
	mode, _ := db["redundancy_mode"].(string)
	tolerance, minDomains := fdbFaultTolerance(mode)

	// GetRoleCountsWithDefaults.
	roleStorage := num(db, "storage")
	if roleStorage == 0 {
		roleStorage = 2*tolerance + 1
	}
	roleLogs := num(db, "logs")
	if roleLogs == 0 {
		roleLogs = 3
		if mode == "three_data_hall" {
			roleLogs = 4
		}
	}
	separated := num(db, "grv_proxies") > 0 || num(db, "commit_proxies") > 0
	proxies, grv, commit := num(db, "proxies"), num(db, "grv_proxies"), num(db, "commit_proxies")
	if separated {
		proxies = 0
	} else {
		grv, commit = 0, 0
	}
	if commit == 0 && grv == 0 && proxies == 0 {
		proxies = 3
	} else if proxies == 0 {
		if grv == 0 {
			grv = 1
		}
		if commit == 0 {
			commit = 2
		}
	}
	resolvers := num(db, "resolvers")
	if resolvers == 0 {
		resolvers = 1
	}
	multiRegion := num(db, "usable_regions") > 1
	remoteLogs := num(db, "remote_logs")
	if remoteLogs == 0 {
		remoteLogs = -1
		if multiRegion {
			remoteLogs = roleLogs
		}
	}
	logRouters := num(db, "log_routers")
	if logRouters == 0 {
		logRouters = -1
		if multiRegion {
			logRouters = roleLogs
		}
	}

	// calculateProcessCountFromRole: 0 when an alternative class has a positive count or the
	// role count is negative.
	fromRole := func(count int, alternatives ...int) int {
		for _, a := range alternatives {
			if a > 0 {
				return 0
			}
		}
		return max(count, 0)
	}
	// calculateProcessCount: the largest count, plus the fault tolerance when asked, split over
	// the Kubernetes clusters of a multi-KC cluster; -1 (none) when nothing needs the class.
	zoneIndex, _, _ := unstructured.NestedInt64(spec, "faultDomain", "zoneIndex")
	zoneCount, _, _ := unstructured.NestedInt64(spec, "faultDomain", "zoneCount")
	faultKey, _, _ := unstructured.NestedString(spec, "faultDomain", "key")
	calc := func(addTolerance bool, candidates ...int) int {
		if zoneIndex < 0 {
			return -1
		}
		n := 0
		for _, c := range candidates {
			n = max(n, c)
		}
		if n <= 0 {
			return -1
		}
		if addTolerance {
			n += tolerance
		}
		if faultKey == "foundationdb.org/kubernetes-cluster" {
			zc := int(zoneCount)
			if zc < 1 {
				zc = minDomains + tolerance
			}
			overflow := n % zc
			n /= zc
			if int(zoneIndex) < overflow {
				n++
			}
		}
		return n
	}

	// A satellite data center (spec.dataCenter listed with satellite in a region, and never as
	// a main one) runs logs only, 1 + the region's satellite logs by default.
	dataCenter, _, _ := unstructured.NestedString(spec, "dataCenter")
	isMain, isSatellite, satelliteLogs := false, false, 0
	regions, _, _ := unstructured.NestedSlice(db, "regions")
	for _, r := range regions {
		rm, _ := r.(map[string]any)
		dcs, _, _ := unstructured.NestedSlice(rm, "datacenters")
		for _, d := range dcs {
			dm, _ := d.(map[string]any)
			if id, _ := dm["id"].(string); id == "" || id != dataCenter {
				continue
			}
			if num(dm, "satellite") == 0 {
				isMain = true
			} else {
				isSatellite = true
				satelliteLogs = max(satelliteLogs, num(rm, "satellite_logs"))
			}
		}
	}
	if isSatellite && !isMain && counts["log"] == 0 {
		counts["log"] = 1 + satelliteLogs
		return positive(counts)
	}
	if counts["storage"] == 0 {
		counts["storage"] = calc(false, roleStorage)
	}
	if counts["log"] == 0 {
		counts["log"] = calc(true, fromRole(roleLogs+satelliteLogs, counts["log"]), fromRole(remoteLogs, counts["log"]))
	}
	if counts["stateless"] == 0 {
		n := fromRole(1, counts["master"]) + fromRole(1, counts["cluster_controller"]) + fromRole(resolvers, counts["resolution"]) +
			fromRole(1, counts["ratekeeper"]) + fromRole(1, counts["data_distributor"])
		if separated {
			n += fromRole(grv, counts["grv_proxy"]) + fromRole(commit, counts["commit_proxy"])
		} else {
			n += fromRole(proxies, counts["proxy"])
		}
		counts["stateless"] = calc(true, n, fromRole(logRouters))
	}
	return positive(counts)
}

// fdbFaultTolerance is the operator's DesiredFaultTolerance and MinimumFaultDomains of a
// redundancy mode (api/v1beta2 foundationdb_database_configuration.go; unset is double).
func fdbFaultTolerance(mode string) (tolerance, minDomains int) {
	switch mode {
	case "single":
		return 0, 1
	case "double", "":
		return 1, 2
	case "triple", "three_data_hall":
		return 2, 3
	}
	return 0, 1
}

// positive is ProcessCounts.Map: the classes with a count above 0.
func positive(counts map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range counts {
		if v > 0 {
			out[k] = v
		}
	}
	return out
}
