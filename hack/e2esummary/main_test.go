package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	const pkg = "example.com/e2e"
	ev := func(action, test, output string) string {
		var b strings.Builder
		b.WriteString(`{"Action":"` + action + `","Package":"` + pkg + `"`)
		if test != "" {
			b.WriteString(`,"Test":"` + test + `"`)
		}
		if output != "" {
			b.WriteString(`,"Output":` + quote(output))
		}
		return b.String() + "}\n"
	}
	passing := ev("run", "TestA", "") + ev("output", "TestA", "=== RUN   TestA\n") +
		ev("output", "TestA", "    a_test.go:3: chatter\n") + ev("output", "TestA", "--- PASS: TestA (0.01s)\n") + strings.Replace(ev("pass", "TestA", ""), "}", `,"Elapsed":12.5}`, 1)
	killmatrix := ev("run", "TestKill", "") + ev("output", "TestKill", "    k_test.go:9: kill matrix: seed 42, 10 kill points\n") +
		ev("output", "TestKill", "    k_test.go:99:   RETRY 1 after the kill: exit 3: locked\n") + ev("pass", "TestKill", "")
	skipped := ev("run", "TestRealNodeX", "") + ev("output", "TestRealNodeX", "=== RUN   TestRealNodeX\n") +
		ev("output", "TestRealNodeX", "    realnode_test.go:60: real nodes unavailable: not root\n") +
		ev("output", "TestRealNodeX", "--- SKIP: TestRealNodeX (0.00s)\n") + ev("skip", "TestRealNodeX", "") +
		ev("run", "TestRealNodeY", "") + ev("output", "TestRealNodeY", "    realnode_test.go:60: real nodes unavailable: not root\n") + ev("skip", "TestRealNodeY", "")
	failing := ev("run", "TestB", "") + ev("output", "TestB", "=== RUN   TestB\n") +
		ev("run", "TestB/sub", "") + ev("output", "TestB/sub", "    b_test.go:7: boom\n") + ev("fail", "TestB/sub", "") +
		ev("output", "TestB", "--- FAIL: TestB (0.02s)\n") + ev("fail", "TestB", "")
	tests := []struct {
		name    string
		in      string
		wantOK  bool
		want    []string
		notWant []string
	}{
		{"green with skips", passing + killmatrix + skipped + ev("output", "", "PASS\n") + ev("output", "", "ok  \t"+pkg+"\t1.2s\n") + ev("pass", "", ""), true,
			[]string{"ok  \t" + pkg + "\t1.2s\n",
				"TestKill: k_test.go:9: kill matrix: seed 42",
				"TestKill: k_test.go:99:   RETRY 1",
				"e2e summary: 2 tests ran (2 passed, 0 failed), 2 skipped\n",
				"  skipped 2: real nodes unavailable: not root (TestRealNodeX, TestRealNodeY)\n",
				"  slowest of 12s: TestA 12s, TestKill 0s\n"},
			[]string{"chatter", "PASS\n"}},
		{"a failure", passing + failing + ev("output", "", "FAIL\n") + ev("output", "", "FAIL\t"+pkg+"\t1.2s\n") + ev("fail", "", ""), false,
			[]string{"b_test.go:7: boom", "--- FAIL: TestB", "FAIL\t" + pkg + "\t1.2s\n", "e2e summary: 2 tests ran (1 passed, 1 failed), 0 skipped\n"},
			[]string{"chatter"}},
		{"a test the binary died under", passing + ev("run", "TestC", "") + ev("output", "TestC", "    c_test.go:1: waiting\n") +
			ev("output", "", "panic: test timed out after 40m0s\n") + ev("output", "", "FAIL\t"+pkg+"\t2400s\n") + ev("fail", "", ""), false,
			[]string{"panic: test timed out", "--- TestC (" + pkg + ") did not finish", "c_test.go:1: waiting", "e2e summary: 2 tests ran (1 passed, 1 failed)", "  did not finish: TestC (" + pkg + ")\n"}, nil},
		{"build failure", "# " + pkg + "\nx_test.go:1: syntax error\n" + ev("output", "", "FAIL\t"+pkg+" [build failed]\n") + ev("fail", "", ""), false,
			[]string{"syntax error", "[build failed]"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			ok, err := run(strings.NewReader(tt.in), &out, "e2e")
			if err != nil || ok != tt.wantOK {
				t.Fatalf("run = %v, %v; want %v:\n%s", ok, err, tt.wantOK, out.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(out.String(), w) {
					t.Errorf("output has %q:\n%s", w, out.String())
				}
			}
		})
	}
	if ok, err := run(strings.NewReader(""), &bytes.Buffer{}, "e2e"); ok || err == nil {
		t.Errorf("empty input: %v, %v; want an error", ok, err)
	}
}

func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}
