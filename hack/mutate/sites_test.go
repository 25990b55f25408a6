package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// root is the repository root, from this package's directory.
const root = "../.."

// gates are functions every refusal of which (refusals) is a safety site, except one that
// only passes an error on (if err != nil): file -> function names.
var gates = map[string][]string{
	"internal/engines/foundationdb/restart.go": {"checkStatus", "checkReporting", "checkCR", "Before", "action", "maintenanceOn"},
	// FoundationDB removals (replace, scale down) on both layouts: the fault-domain and
	// fault-tolerance refusals, the operator-state checks before marking, the count patches.
	"internal/engines/foundationdb/replace.go":    {"checkRemoval", "mark"},
	"internal/engines/foundationdb/scale.go":      {"PlanScale", "patchCounts"},
	"internal/engines/foundationdb/stsscale.go":   {"planScaleStatefulSet", "setReplicas"},
	"internal/engines/foundationdb/stsreplace.go": {"planReplaceStatefulSet"},
	// The shared procedures: the restart preflight, the batch rule that the other pods are
	// Ready, the replacement's identity checks.
	"internal/ops/restart.go": {"preflight"},
	"internal/ops/batches.go": {"othersReady"},
	"internal/ops/replace.go": {"recreateStep", "waitOne"},
	// CrateDB bootstrap: never on a formed cluster.
	"internal/engines/cratedb/bootstrap.go": {"PlanBootstrap", "readyPod"},
	// The locks: our Lease (another holder, another session of the same ID, the deny list)
	// and steering requests; the FoundationDB operator's lock key; the operator's pause and
	// deny list.
	"internal/ops/lock/lock.go":                {"decide", "otherSession"},
	"internal/ops/lock/control.go":             {"RequestControl"},
	"internal/engines/foundationdb/fdblock.go": {"decide", "Take", "Renew"},
	"internal/engines/foundationdb/pause.go":   {"SetSkip"},
	"internal/engines/foundationdb/deny.go":    {"SetOperatorDeny"},
	// CrateDB: the restart preflight and batch checks, the scale/replace gates, the
	// master-quorum and drainability checks, the node-identity refusals.
	"internal/engines/cratedb/preflight.go":  {"Preflight"},
	"internal/engines/cratedb/batch.go":      {"batchNodes", "checkBatchMasters", "checkBatch"},
	"internal/engines/cratedb/engine.go":     {"PlanStep"},
	"internal/engines/cratedb/nodes.go":      {"missingWithRed"},
	"internal/engines/cratedb/quorum.go":     {"checkMasterRemoval"},
	"internal/engines/cratedb/drainblock.go": {"checkDrainable"},
	"internal/engines/cratedb/scale.go":      {"checkShrink"},
	"internal/engines/cratedb/replace.go":    {"checkReplaceable", "checkReplace"},
	// replicated: the roles change only on a settled StatefulSet, a secondary only with a
	// primary to follow.
	"internal/engines/replicated/engine.go":  {"checkSettled"},
	"internal/engines/replicated/restart.go": {"giveRole"},
	"internal/engines/replicated/steps.go":   {"fill"},
	"internal/engines/etcd/steps.go":         {"checkAllHealthy", "checkRemoval", "pvcStep", "addStep", "promoteStep", "promoteWhenReady", "quorumLostBeforeRemoval"},
	"internal/engines/etcd/scale.go":         {"checkScale", "cleanupStep"},
	"internal/engines/etcd/preflight.go":     {"Preflight"},
	"internal/engines/etcd/restart.go":       {"Before", "After"},
	"internal/engines/etcd/repair.go":        {"BeforeBatch", "NotMembers"},
	"internal/engines/etcd/service.go":       {"checkPeerDNS"},
	"internal/engines/etcd/layout.go":        {"checkDrivable"},
	"internal/engines/etcd/conn.go":          {"endpointFor", "checkAdvertised", "checkAuth", "checkRoot"},
	"internal/engines/etcd/apictl.go":        {"newAPICtl", "forwardTarget", "open", "run"},
	"internal/engines/etcd/site.go":          {"newCtl"},
}

// refusals are the calls that refuse (in gates).
var refusals = []string{"Preconditionf", "Refusef", "Usagef", "Lockedf", "foreignZone"}

// passesErrorOn reports whether cond is "err != nil".
func passesErrorOn(cond ast.Expr) bool {
	b, ok := cond.(*ast.BinaryExpr)
	if !ok || b.Op != token.NEQ {
		return false
	}
	x, ok1 := b.X.(*ast.Ident)
	y, ok2 := b.Y.(*ast.Ident)
	return ok1 && ok2 && x.Name == "err" && y.Name == "nil"
}

// guardCalls are the calls that are safety sites wherever they are in internal/engines,
// internal/ops and internal/kube: the write guard and the executor's lock check.
var guardCalls = []string{"CheckWriteGuard", "lockLost"}

// site is a safety check found in the source: the line of the "if" that guards it.
type site struct {
	file string
	line int
	what string
}

// findSites lists the safety sites of the repository's non-test code.
func findSites(t *testing.T) []site {
	t.Helper()
	var out []site
	fset := token.NewFileSet()
	for _, dir := range []string{"internal/engines", "internal/ops", "internal/kube"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				gate := false
				for _, name := range gates[rel] {
					gate = gate || fn.Name.Name == name
				}
				var ifs []*ast.IfStmt
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					if n == nil {
						return true
					}
					// Keep the stack of enclosing ifs: pop those that end before n.
					for len(ifs) > 0 && ifs[len(ifs)-1].End() <= n.Pos() {
						ifs = ifs[:len(ifs)-1]
					}
					if is, ok := n.(*ast.IfStmt); ok {
						ifs = append(ifs, is)
					}
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					name := ""
					switch fun := call.Fun.(type) {
					case *ast.Ident:
						name = fun.Name
					case *ast.SelectorExpr:
						name = fun.Sel.Name
					}
					isGuard := false
					for _, g := range guardCalls {
						isGuard = isGuard || name == g
					}
					if !isGuard && !(gate && slices.Contains(refusals, name)) {
						return true
					}
					pos := call.Pos()
					if len(ifs) > 0 {
						is := ifs[len(ifs)-1]
						if !isGuard && passesErrorOn(is.Cond) {
							return true
						}
						pos = is.Pos()
					}
					out = append(out, site{file: rel, line: fset.Position(pos).Line, what: fn.Name.Name + ": " + name})
					return true
				})
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestMutantsApply: every mutant of the list applies (its find is in its file exactly once),
// names a package that exists, and the ids are unique (Load).
func TestMutantsApply(t *testing.T) {
	mutants, err := Load(filepath.Join(root, "hack/mutate/mutants.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mutants {
		src, err := os.ReadFile(filepath.Join(root, m.File))
		if err != nil {
			t.Errorf("mutant %s: %v", m.ID, err)
			continue
		}
		if _, err := m.Apply(string(src)); err != nil {
			t.Error(err)
		}
		if st, err := os.Stat(filepath.Join(root, m.Pkg)); err != nil || !st.IsDir() || !strings.HasPrefix(m.Pkg, "./") {
			t.Errorf("mutant %s: pkg %q is not a package directory of the repository", m.ID, m.Pkg)
		}
	}
}

// TestEverySafetySiteHasAMutant: every refusal of the gate functions (the FoundationDB restart
// gate, the --method pod coordinator rule, the bounce's re-check) and every write guard or
// lock check in internal/engines, internal/ops and internal/kube is covered by a mutant (its
// find spans the line of the site's "if"). A new one joins hack/mutate/mutants.txt, with the
// test that fails without it.
func TestEverySafetySiteHasAMutant(t *testing.T) {
	mutants, err := Load(filepath.Join(root, "hack/mutate/mutants.txt"))
	if err != nil {
		t.Fatal(err)
	}
	type span struct{ from, to int }
	covered := map[string][]span{}
	for _, m := range mutants {
		src, err := os.ReadFile(filepath.Join(root, m.File))
		if err != nil {
			t.Fatal(err)
		}
		i := strings.Index(string(src), m.Find)
		if i < 0 {
			continue // TestMutantsApply reports it
		}
		from := strings.Count(string(src[:i]), "\n") + 1
		covered[m.File] = append(covered[m.File], span{from, from + strings.Count(m.Find, "\n")})
	}
	sites := findSites(t)
	if len(sites) < 15 {
		t.Fatalf("found only %d safety sites: the search is broken", len(sites))
	}
	for _, s := range sites {
		ok := false
		for _, sp := range covered[s.file] {
			ok = ok || (sp.from <= s.line && s.line <= sp.to)
		}
		if !ok {
			t.Errorf("%s:%d (%s) is a safety check no mutant of hack/mutate/mutants.txt disables: add one, with the test that fails without the check", s.file, s.line, s.what)
		}
	}
}

// TestParse: the list format, and its errors.
func TestParse(t *testing.T) {
	ms, err := Parse("l", "# c\nid: a\nfile: f.go\nfind: \"x\\n\\ty\"\nreplace: z\npkg: ./p\nrun: ^T$\n\nid: b\nfile: f.go\nfind: q\nreplace:\npkg: ./p\nrun: T\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Find != "x\n\ty" || ms[1].Replace != "" || ms[1].Line != 9 {
		t.Fatalf("parsed %+v", ms)
	}
	for _, bad := range []string{
		"id: a\nfile: f\nfind: x\nreplace: x\npkg: ./p\nrun: T\n",
		"id: a\nfile: f\nfind: x\nreplace: y\npkg: ./p\n",
		"id: a\nfile: f\nfind: x\nreplace: y\npkg: ./p\nrun: T\n\nid: a\nfile: f\nfind: z\nreplace: y\npkg: ./p\nrun: T\n",
		"id: a\nwhat: f\n",
	} {
		if _, err := Parse("l", bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if _, err := (Mutant{ID: "a", Find: "x"}).Apply("x x"); err == nil {
		t.Error("applied a find that occurs twice")
	}
}
