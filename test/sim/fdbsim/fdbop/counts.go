package fdbop

// desiredCounts is the number of process groups per class the operator runs: spec.processCounts
// with 0 or unset replaced by the default for the redundancy mode, and -1 as none
// (api/v1beta2/foundationdbcluster_types.go GetProcessCountsWithDefaults, calculateProcessCount,
// calculateProcessCountFromRole; foundationdb_database_configuration.go
// GetRoleCountsWithDefaults, DesiredFaultTolerance, getDefaultLogCount), then ProcessCounts.Map
// (only counts above 0). The stand-in runs one data center in one Kubernetes cluster: no
// satellite or multi-KC split.
func (s *clusterSpec) desiredCounts() map[string]int {
	db := s.DatabaseConfiguration
	tolerance := 0 // single and unknown modes
	switch db.RedundancyMode {
	case "", "double":
		tolerance = 1
	case "triple", "three_data_hall":
		tolerance = 2
	}
	storageRole, logRole := db.Storage, db.Logs
	if storageRole == 0 {
		storageRole = 2*tolerance + 1
	}
	if logRole == 0 {
		logRole = 3
		if db.RedundancyMode == "three_data_hall" {
			logRole = 4
		}
	}
	proxies, grv, commit := db.Proxies, db.GrvProxies, db.CommitProxies
	separated := grv > 0 || commit > 0 // AreSeparatedProxiesConfigured
	if separated {
		proxies = 0
	} else {
		grv, commit = 0, 0
	}
	switch {
	case proxies == 0 && grv == 0 && commit == 0:
		proxies = 3
	case proxies == 0:
		if grv == 0 {
			grv = 1
		}
		if commit == 0 {
			commit = 2
		}
	}
	resolvers := db.Resolvers
	if resolvers == 0 {
		resolvers = 1
	}
	remoteLogs, logRouters := db.RemoteLogs, db.LogRouters
	if remoteLogs == 0 {
		remoteLogs = -1
		if db.UsableRegions > 1 {
			remoteLogs = logRole
		}
	}
	if logRouters == 0 {
		logRouters = -1
		if db.UsableRegions > 1 {
			logRouters = logRole
		}
	}
	counts := map[string]int{}
	for k, v := range s.ProcessCounts {
		counts[k] = v
	}
	role := func(n int, alternatives ...int) int { // calculateProcessCountFromRole
		for _, a := range alternatives {
			if a > 0 {
				return 0
			}
		}
		return max(n, 0)
	}
	process := func(addTolerance bool, candidates ...int) int { // calculateProcessCount
		n := 0
		for _, c := range candidates {
			n = max(n, c)
		}
		if n == 0 {
			return -1
		}
		if addTolerance {
			n += tolerance
		}
		return n
	}
	if counts["storage"] == 0 {
		counts["storage"] = process(false, storageRole)
	}
	if counts["log"] == 0 {
		counts["log"] = process(true, role(logRole, counts["log"]), role(remoteLogs, counts["log"]))
	}
	if counts["stateless"] == 0 {
		n := role(1, counts["master"]) + role(1, counts["cluster_controller"]) + role(resolvers, counts["resolution"]) +
			role(1, counts["ratekeeper"]) + role(1, counts["data_distributor"])
		if separated {
			n += role(grv, counts["grv_proxy"]) + role(commit, counts["commit_proxy"])
		} else {
			n += role(proxies, counts["proxy"])
		}
		counts["stateless"] = process(true, n, role(logRouters))
	}
	out := map[string]int{}
	for k, v := range counts {
		if v > 0 {
			out[k] = v
		}
	}
	return out
}
