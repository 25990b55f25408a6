package fdbsim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// parseLine splits an fdbcli line into commands of tokens as fdbcli.actor.cpp parseLine does:
// `;` ends a command outside quotes, spaces (and after a token \n, \t, \r) separate tokens, `"`
// toggles quoting and forces a token (so `""` is an empty token), a backslash escapes `"`, `\`,
// space and `;`, and \xHH / \uHHHH (at most 0xff) give one byte. A trailing backslash or a bad
// escape makes the line malformed; an open quote makes it partial. After a `;` only spaces are
// skipped, so "status;" is two commands, the second empty (and `status` is then echoed).
func parseLine(line string) (ret [][]string, malformed, partial bool) {
	b := []byte(line)
	const npos = math.MaxInt
	firstNot := func(set string, from int) int {
		for j := from; j < len(b); j++ {
			if !strings.ContainsRune(set, rune(b[j])) {
				return j
			}
		}
		return npos
	}
	at := func(i int) byte {
		if i < len(b) {
			return b[i]
		}
		return 0
	}
	erase := func(i, n int) { b = append(b[:i], b[i+n:]...) }
	quoted, forcetoken := false, false
	var buf []string
	i := firstNot(" ", 0)
	offset := i
	push := func(end int) {
		if end > offset || (forcetoken && end == offset) {
			buf = append(buf, string(b[offset:end]))
		}
	}
	for i <= len(b) {
		switch at(i) {
		case ';':
			if quoted {
				i++
				break
			}
			push(i)
			ret = append(ret, buf)
			buf = nil
			i = firstNot(" ", i+1)
			offset = i
			forcetoken = false
		case '"':
			quoted = !quoted
			erase(i, 1)
			forcetoken = true
		case ' ', '\n', '\t', '\r':
			if quoted {
				i++
				break
			}
			push(i)
			i = firstNot(" \n\t\r", i)
			offset = i
			forcetoken = false
		case '\\':
			if i+2 > len(b) {
				return append(ret, buf), true, false
			}
			switch b[i+1] {
			case '"', '\\', ' ', ';':
				erase(i, 1)
			case 'u', 'x':
				n := 4
				if b[i+1] == 'x' {
					n = 2
				}
				if i+2+n > len(b) {
					return append(ret, buf), true, false
				}
				v, err := strconv.ParseUint(string(b[i+2:i+2+n]), 16, 32)
				if err != nil || v > 0xff {
					return append(ret, buf), true, false
				}
				b[i] = byte(v)
				erase(i+1, n+1)
			default:
				return append(ret, buf), true, false
			}
			i++
		default:
			i++
		}
	}
	if i != npos {
		i--
	}
	push(min(i, len(b)))
	ret = append(ret, buf)
	return ret, false, quoted
}

// formatToken is formatStringRef(token, fullEscaping=true) (fdbcli.actor.cpp), used to echo
// commands after ">>>".
func formatToken(t string) string {
	var sb strings.Builder
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c == '\\':
			sb.WriteString(`\\`)
		case c == '"':
			sb.WriteString(`\"`)
		case c == ' ':
			sb.WriteString(`\x20`)
		case c >= 32 && c < 127:
			sb.WriteByte(c)
		default:
			fmt.Fprintf(&sb, `\x%02x`, c)
		}
	}
	return sb.String()
}

// statusText is a short form of `status` (StatusCommand.actor.cpp printStatus, level NORMAL):
// the sections an operator reads first. Callers that need data use `status json`.
func (c *Cluster) statusText(now time.Time) string {
	var sb strings.Builder
	avail := c.available(now)
	dataName, _, minRepl, _ := c.storageState()
	up := 0
	for _, p := range c.procs {
		if p.up {
			up++
		}
	}
	sb.WriteString("Using cluster file `/var/dynamic-conf/fdb.cluster'.\n\n")
	if !c.quorum() || !c.ccReachable() {
		sb.WriteString("Could not communicate with a quorum of coordination servers:\n")
		for _, a := range c.coordinators {
			p := c.coordinatorProcess(a)
			state := "(reachable)"
			if p == nil || !p.up {
				state = "(unreachable)"
			}
			fmt.Fprintf(&sb, "  %s  %s\n", a, state)
		}
		return sb.String()
	}
	fmt.Fprintf(&sb, "Configuration:\n  Redundancy mode        - %s\n  Storage engine         - ssd-2\n", c.cfg.RedundancyMode)
	fmt.Fprintf(&sb, "  Coordinators           - %d\n", len(c.coordinators))
	fmt.Fprintf(&sb, "  Exclusions             - %d (type `exclude' for details)\n", len(c.exclusions))
	if c.maintZone != "" {
		fmt.Fprintf(&sb, "  Maintenance zone       - %s (%d seconds remaining)\n", c.maintZone, int64(c.maintUntil.Sub(now).Seconds()))
	}
	fmt.Fprintf(&sb, "\nCluster:\n  FoundationDB processes - %d\n", up)
	if avail {
		sb.WriteString("  Database available     - true\n")
	} else {
		sb.WriteString("  Database available     - false\n")
	}
	fmt.Fprintf(&sb, "  Recovery state         - %s\n", recoveryStates[c.recoveryIndex(now)])
	fmt.Fprintf(&sb, "\nData:\n  Replication health     - %s (min replicas remaining %d)\n", dataName, minRepl)
	return sb.String()
}
