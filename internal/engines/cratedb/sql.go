package cratedb

import (
	"fmt"
	"strconv"
	"strings"
)

// SQL statements the procedures run, as documented in docs/procedures.md, CrateDB.
// They are shown verbatim in plan Details, so keep them literal.
const (
	sqlAllocPrimaries = `SET GLOBAL TRANSIENT "cluster.routing.allocation.enable" = 'primaries'`
	sqlAllocReset     = `RESET GLOBAL "cluster.routing.allocation.enable"`
	sqlNodeCount      = `SELECT count(*) FROM sys.nodes`
	sqlMaxSeverity    = `SELECT max(severity) FROM sys.health`
	// sqlRedTables: severity 3 is RED in sys.health (GREEN 1, YELLOW 2).
	sqlRedTables      = `SELECT table_schema, table_name FROM sys.health WHERE severity = 3`
	sqlMasterNode     = `SELECT master_node FROM sys.cluster`
	sqlReplicas       = `SELECT DISTINCT number_of_replicas FROM information_schema.tables WHERE number_of_shards IS NOT NULL`
	sqlExclusions     = `SELECT settings['cluster']['routing']['allocation']['exclude']['_name'] FROM sys.cluster`
	sqlAllocEnable    = `SELECT settings['cluster']['routing']['allocation']['enable'] FROM sys.cluster`
	sqlResetExclusion = `RESET GLOBAL "cluster.routing.allocation.exclude._name"`
	// sqlShardsOn also sums the copies' size (bytes, docs/admin/system-information.rst of CrateDB):
	// the drain's ETA comes from the rate the bytes leave at.
	sqlShardsOn = `SELECT node['name'], count(*), sum(size) FROM sys.shards WHERE node['name'] = ANY($1) GROUP BY 1`
	// Node checks 1 and 2 are CrateDB's expected-nodes and recover-after
	// checks.
	sqlAckNodeCheck    = `UPDATE sys.node_checks SET acknowledged = TRUE WHERE id = 1`
	sqlAckRecoverCheck = `UPDATE sys.node_checks SET acknowledged = TRUE WHERE id = 2`
	sqlUserExists      = `SELECT count(*) = 1 FROM sys.users WHERE name = $1`
	// sqlPrivileges counts the cluster-wide privilege types a user holds;
	// ALL PRIVILEGES is DQL, DML, DDL and AL.
	sqlPrivileges = `SELECT count(DISTINCT type) FROM sys.privileges WHERE grantee = $1 AND class = 'CLUSTER' AND state = 'GRANT'`
)

// allPrivilegeTypes is how many types ALL PRIVILEGES grants.
const allPrivilegeTypes = 4

// redacted stands for a secret in plan details and messages.
const redacted = "'***'"

func sqlSetExclusions(names string) string {
	return `SET GLOBAL "cluster.routing.allocation.exclude._name" = ` + quoteLiteral(names)
}

func sqlCreateUserParam(name string) string {
	return `CREATE USER ` + quoteIdent(name) + ` WITH (password = $1)`
}

func sqlGrantAll(name string) string { return `GRANT ALL PRIVILEGES TO ` + quoteIdent(name) }

// sqlVersions reads every node's version.
const sqlVersions = `SELECT version['number'] FROM sys.nodes`

// crash statements carry secrets inline (crash has no parameters), so they
// go to crash on stdin; the redacted forms are for plans.
func crashSetLicense(key string) string { return "SET LICENSE " + quoteLiteral(key) + ";" }
func crashCreateUser(name, pw string) string {
	return "CREATE USER " + quoteIdent(name) + " WITH (password = " + quoteLiteral(pw) + ");"
}
func crashAlterUser(name, pw string) string {
	return "ALTER USER " + quoteIdent(name) + " SET (password = " + quoteLiteral(pw) + ");"
}
func crashGrantAll(name string) string { return sqlGrantAll(name) + ";" }

// quoteLiteral renders a SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// quoteIdent renders a SQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// redact replaces every secret in s; used on anything that may echo a
// statement (crash output, driver errors).
func redact(s string, secrets ...string) string {
	for _, sec := range secrets {
		if sec == "" {
			continue
		}
		s = strings.ReplaceAll(s, quoteLiteral(sec), redacted)
		s = strings.ReplaceAll(s, strings.ReplaceAll(sec, "'", "''"), "***")
		s = strings.ReplaceAll(s, sec, "***")
	}
	return s
}

// replicaCount turns a number_of_replicas value into its lower bound;
// "all" (unbounded) reports ok=false.
func replicaCount(v string) (n int, bounded bool, err error) {
	v = strings.TrimSpace(v)
	if v == "all" {
		return 0, false, nil
	}
	lo, _, _ := strings.Cut(v, "-")
	n, err = strconv.Atoi(lo)
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("unexpected number_of_replicas %q", v)
	}
	return n, true, nil
}

// splitList splits a comma separated setting value.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
