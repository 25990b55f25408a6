package ops

import (
	"fmt"
	"slices"
	"strings"
)

// MaxAllowedListed caps the names an "allowed:" list of a refusal shows: a cluster of
// hundreds of pods or process groups would otherwise print all of them in one line.
const MaxAllowedListed = 10

// Allowed renders the tail of a refusal of the unknown name among allowed: the closest names
// ("did you mean"), then at most MaxAllowedListed of allowed in sorted order and how many
// more there are. allowed keeps the order it is given in.
func Allowed(name string, allowed []string) string {
	var sorted []string
	for _, a := range allowed {
		if !slices.Contains(sorted, a) {
			sorted = append(sorted, a)
		}
	}
	var b strings.Builder
	if close := Closest(name, sorted, 3); len(close) > 0 {
		quoted := make([]string, len(close))
		for i, c := range close {
			quoted[i] = fmt.Sprintf("%q", c)
		}
		fmt.Fprintf(&b, "did you mean %s? ", strings.Join(quoted, " or "))
	}
	if len(sorted) <= MaxAllowedListed {
		fmt.Fprintf(&b, "allowed: %s", strings.Join(sorted, ", "))
		return b.String()
	}
	fmt.Fprintf(&b, "allowed (%d): %s, ... and %d more", len(sorted), strings.Join(sorted[:MaxAllowedListed], ", "), len(sorted)-MaxAllowedListed)
	return b.String()
}

// Closest returns up to n names of candidates nearest to name by edit distance (case
// ignored), nearest first, only those close enough to be a likely typo.
func Closest(name string, candidates []string, n int) []string {
	limit := len(name)/3 + 2
	type scored struct {
		s string
		d int
	}
	var near []scored
	for _, c := range candidates {
		// Below limit, and not a rewrite of the whole name (a one-letter name is near everything).
		if d := EditDistance(strings.ToLower(name), strings.ToLower(c)); d < limit && d < len(name) {
			near = append(near, scored{c, d})
		}
	}
	slices.SortStableFunc(near, func(a, b scored) int { return a.d - b.d })
	var out []string
	for _, s := range near[:min(n, len(near))] {
		out = append(out, s.s)
	}
	return out
}

// EditDistance is the Levenshtein distance of a and b.
func EditDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
