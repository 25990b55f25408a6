package cratedbsim

import (
	"slices"
	"strconv"
	"strings"
)

// runtimeSettings are the cluster settings SET GLOBAL accepts, with their defaults: a subset
// of CrateDB's exposed settings (docs/config/cluster.rst of CrateDB), the ones operating a
// cluster touches. Any other name is rejected as CrateDB rejects a name it does not expose.
func runtimeSettings() map[string]string {
	m := map[string]string{
		"cluster.routing.allocation.enable":                            "all",
		"cluster.routing.rebalance.enable":                             "all",
		"cluster.routing.allocation.allow_rebalance":                   "indices_all_active",
		"cluster.routing.allocation.cluster_concurrent_rebalance":      "2",
		"cluster.routing.allocation.node_concurrent_recoveries":        "2",
		"cluster.routing.allocation.node_initial_primaries_recoveries": "4",
		"cluster.routing.allocation.balance.shard":                     "0.45",
		"cluster.routing.allocation.balance.index":                     "0.55",
		"cluster.routing.allocation.balance.threshold":                 "1.0",
		"cluster.routing.allocation.disk.threshold_enabled":            "true",
		"cluster.routing.allocation.disk.watermark.low":                "85%",
		"cluster.routing.allocation.disk.watermark.high":               "90%",
		"cluster.routing.allocation.disk.watermark.flood_stage":        "95%",
		"cluster.routing.allocation.total_shards_per_node":             "-1",
		"cluster.max_shards_per_node":                                  "1000",
		"cluster.graceful_stop.min_availability":                       "primaries",
		"cluster.graceful_stop.timeout":                                "2h",
		"cluster.graceful_stop.force":                                  "false",
		"cluster.info.update.interval":                                 "30s",
		"indices.recovery.max_bytes_per_sec":                           "40mb",
		"indices.breaker.query.limit":                                  "60%",
		"stats.enabled":                                                "true",
		"stats.jobs_log_size":                                          "10000",
		"stats.operations_log_size":                                    "10000",
		"stats.service.interval":                                       "24h",
		"bulk.request_timeout":                                         "1m",
		"statement_timeout":                                            "0",
	}
	for _, kind := range []string{"include", "exclude", "require"} {
		for _, attr := range []string{"_name", "_ip", "_id", "_host"} {
			m["cluster.routing.allocation."+kind+"."+attr] = ""
		}
	}
	return m
}

// settingOIDs are the types sys.cluster gives the non-text runtime settings, as CrateDB lists
// them in information_schema.columns (crate/crate docs/admin/system-information.rst, "Cluster
// settings"); every other runtime setting is text.
func settingOIDs() map[string]uint32 {
	return map[string]uint32{
		"cluster.graceful_stop.force":                                  oidBool,
		"cluster.max_shards_per_node":                                  oidInt4,
		"cluster.routing.allocation.balance.index":                     oidFloat4,
		"cluster.routing.allocation.balance.shard":                     oidFloat4,
		"cluster.routing.allocation.balance.threshold":                 oidFloat4,
		"cluster.routing.allocation.cluster_concurrent_rebalance":      oidInt4,
		"cluster.routing.allocation.disk.threshold_enabled":            oidBool,
		"cluster.routing.allocation.node_concurrent_recoveries":        oidInt4,
		"cluster.routing.allocation.node_initial_primaries_recoveries": oidInt4,
		"cluster.routing.allocation.total_shards_per_node":             oidInt4,
		"stats.enabled":             oidBool,
		"stats.jobs_log_size":       oidInt4,
		"stats.operations_log_size": oidInt4,
	}
}

// settingOID is the sys.cluster column type of a runtime setting.
func settingOID(key string) uint32 {
	if oid, ok := settingOIDs()[key]; ok {
		return oid
	}
	return oidVarchar
}

// typedSetting is a setting's stored text as a value of its column type (nil if it does not
// parse, which SET GLOBAL's validation should have prevented).
func typedSetting(oid uint32, v string) any {
	switch oid {
	case oidBool:
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
		return nil
	case oidInt4:
		if n, err := strconv.ParseInt(v, 10, 32); err == nil {
			return int32(n)
		}
		return nil
	case oidFloat4:
		if f, err := strconv.ParseFloat(v, 32); err == nil {
			return float32(f)
		}
		return nil
	}
	return v
}

// staticSettings are exposed settings that exist but cannot change at runtime.
func staticSettings() []string {
	return []string{
		"gateway.expected_nodes", "gateway.expected_data_nodes", "gateway.recover_after_nodes",
		"gateway.recover_after_data_nodes", "gateway.recover_after_time", "license.enterprise",
		"node.name", "node.master", "node.data", "cluster.name",
		// Not runtime in CrateDB (docs/config/cluster.rst): given with -C on every node.
		"cluster.routing.allocation.awareness.attributes",
	}
}

func settingDefault(key string) string { return runtimeSettings()[key] }

// resolveSettingNames maps a SET/RESET GLOBAL name to the settings it covers: the setting
// itself or every setting under a prefix ("cluster.routing.allocation"), as CrateDB's
// CrateSettings does; an error for unknown or static names.
func resolveSettingNames(name string) ([]string, error) {
	if slices.Contains(staticSettings(), name) {
		return nil, &SQLError{SQLState: "0A000", HTTPStatus: 400, Code: 4004,
			Message: "UnsupportedOperationException[Setting '" + name + "' cannot be set/reset at runtime]"}
	}
	all := runtimeSettings()
	if _, ok := all[name]; ok || strings.HasPrefix(name, "logger.") {
		return []string{name}, nil
	}
	var out []string
	for k := range all {
		if strings.HasPrefix(k, name+".") {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, errIllegal("Setting '%s' is not supported", name)
	}
	slices.Sort(out)
	return out, nil
}
