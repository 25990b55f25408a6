package main

import (
	"fmt"
	"strings"
	"time"
)

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// format renders a result the way crash does: the table (stdout) and the summary line
// (stderr), e.g. "CREATE OK, 1 row affected (0.012 sec)" (crate/crash command.py
// _exec_and_print).
func format(verb string, res *response, took time.Duration) (table, summary string) {
	secs := took.Seconds()
	if len(res.Cols) == 0 {
		return "", fmt.Sprintf("%s OK, %d row%s affected (%.3f sec)", verb, res.RowCount, plural(res.RowCount), secs)
	}
	cells := make([][]string, len(res.Rows))
	widths := make([]int, len(res.Cols))
	numeric := make([]bool, len(res.Cols))
	for i, c := range res.Cols {
		widths[i] = len(c)
	}
	for r, row := range res.Rows {
		cells[r] = make([]string, len(res.Cols))
		for i := range res.Cols {
			var v any
			if i < len(row) {
				v = row[i]
			}
			s, isNum := cell(v)
			numeric[i] = numeric[i] || isNum
			cells[r][i] = s
			widths[i] = max(widths[i], len(s))
		}
	}
	var b strings.Builder
	sep := func() {
		for _, w := range widths {
			b.WriteString("+" + strings.Repeat("-", w+2))
		}
		b.WriteString("+\n")
	}
	line := func(vals []string, right bool) {
		for i, v := range vals {
			if right && numeric[i] {
				fmt.Fprintf(&b, "| %*s ", widths[i], v)
			} else {
				fmt.Fprintf(&b, "| %-*s ", widths[i], v)
			}
		}
		b.WriteString("|\n")
	}
	sep()
	line(res.Cols, false)
	sep()
	for _, row := range cells {
		line(row, true)
	}
	if len(cells) > 0 {
		sep()
	}
	n := int64(len(res.Rows))
	return b.String(), fmt.Sprintf("%s %d row%s in set (%.3f sec)", verb, n, plural(n), secs)
}

func cell(v any) (string, bool) {
	switch v := v.(type) {
	case nil:
		return "NULL", false
	case bool:
		return strings.ToUpper(fmt.Sprint(v)), false
	case float64:
		if v == float64(int64(v)) {
			return fmt.Sprintf("%d", int64(v)), true
		}
		return fmt.Sprint(v), true
	case string:
		return v, false
	default:
		return fmt.Sprint(v), false
	}
}
