package fdbsim

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// The key-value commands of fdbcli (fdbcli/fdbcli.cpp: writemode, option, set, get, clear,
// clearrange, getrange, getrangekeys), in autocommit mode: each write is its own committed
// transaction. They exist here because the FoundationDB operator keeps its list of process
// groups under maintenance as keys (fdbclient/admin_client.go SetProcessesUnderMaintenance),
// and a tool that works with the operator's maintenance checker must write them.

// Key space bounds (fdbclient/SystemData.cpp): normal keys end at \xff, system keys at \xff\xff;
// the special key space (\xff\xff...) is not modelled.
const (
	normalKeysEnd = "\xff"
	systemKeysEnd = "\xff\xff"
)

// Transaction options fdbcli accepts by name (fdbclient/vexillographer/fdb.options,
// scope TransactionOption). Only ACCESS_SYSTEM_KEYS and READ_SYSTEM_KEYS change what the
// model does; the others are accepted as the real client accepts them.
var transactionOptions = map[string]bool{
	"ACCESS_SYSTEM_KEYS": true, "READ_SYSTEM_KEYS": true, "PRIORITY_SYSTEM_IMMEDIATE": true,
	"PRIORITY_BATCH": true, "LOCK_AWARE": true, "READ_LOCK_AWARE": true, "TIMEOUT": true,
	"RETRY_LIMIT": true, "MAX_RETRY_DELAY": true, "CAUSAL_READ_RISKY": true, "CAUSAL_WRITE_RISKY": true,
	"READ_YOUR_WRITES_DISABLE": true, "NEXT_WRITE_NO_WRITE_CONFLICT_RANGE": true, "DEBUG_TRANSACTION_IDENTIFIER": true,
	"LOG_TRANSACTION": true, "RAW_ACCESS": true, "SPECIAL_KEY_SPACE_ENABLE_WRITES": true,
	"SPECIAL_KEY_SPACE_RELAXED": true, "TAG": true, "AUTO_THROTTLE_TAG": true, "BYPASS_UNREADABLE": true,
	"USE_GRV_CACHE": true, "SKIP_GRV_CACHE": true, "SIZE_LIMIT": true, "REPORT_CONFLICTING_KEYS": true,
	"INITIALIZE_NEW_DATABASE": true,
}

// errThrown ends an fdbcli line after an FDB error was printed: the error escapes the command
// loop to the catch in fdbcli.cpp's cli(), which prints "ERROR: <what> (<code>)" and stops
// the line without the "previous command failed" warning.
var errThrown = errors.New("fdb error")

// fdbError prints an FDB error as fdbcli's catch does (flow/error_definitions.h names).
func (s *session) fdbError(what string, code int) error {
	fmt.Fprintf(s.stderr, "ERROR: %s (%d)\n", what, code)
	return errThrown
}

var kvUsages = map[string]string{
	"writemode":    "writemode <on|off>",
	"set":          "set <KEY> <VALUE>",
	"get":          "get <KEY>",
	"clear":        "clear <KEY>",
	"clearrange":   "clearrange <BEGINKEY> [ENDKEY]",
	"getrange":     "getrange <BEGINKEY> [ENDKEY] [LIMIT]",
	"getrangekeys": "getrangekeys <BEGINKEY> [ENDKEY] [LIMIT]",
	"option":       "option <STATE> <OPTION> <ARG>",
}

func (s *session) kvUsage(cmd string) (bool, error) {
	fmt.Fprintf(s.stdout, "Usage: %s\n", kvUsages[cmd])
	return false, nil
}

// maxRead/maxWrite are ReadYourWritesTransaction::getMaxReadKey/getMaxWriteKey
// (fdbclient/ReadYourWrites.cpp): system keys need READ_SYSTEM_KEYS or ACCESS_SYSTEM_KEYS.
func (s *session) maxRead() string {
	if o := s.opts(); o["ACCESS_SYSTEM_KEYS"] || o["READ_SYSTEM_KEYS"] {
		return systemKeysEnd
	}
	return normalKeysEnd
}

func (s *session) maxWrite() string {
	if s.opts()["ACCESS_SYSTEM_KEYS"] {
		return systemKeysEnd
	}
	return normalKeysEnd
}

func (s *session) kvCommand(tokens []string) (bool, error) {
	cmd := tokens[0]
	switch cmd {
	case "writemode":
		if len(tokens) != 2 {
			return s.kvUsage(cmd)
		}
		switch strings.ToLower(tokens[1]) {
		case "on":
			s.writeMode = true
		case "off":
			s.writeMode = false
		default:
			return s.kvUsage(cmd)
		}
		return true, nil
	case "option":
		return s.option(tokens)
	case "set", "clear", "clearrange":
		if !s.writeMode {
			fmt.Fprintf(s.stderr, "ERROR: writemode must be enabled to set or clear keys in the database.\n")
			return false, nil
		}
	}
	switch cmd {
	case "set":
		if len(tokens) != 3 {
			return s.kvUsage(cmd)
		}
		// ReadYourWritesTransaction::set checks the key at once, in a transaction too.
		if tokens[1] >= s.maxWrite() {
			return false, s.fdbError("Key outside legal range", 2004)
		}
		return s.mutate(mutation{begin: tokens[1], end: tokens[1] + "\x00", value: []byte(tokens[2])})
	case "clear":
		if len(tokens) != 2 {
			return s.kvUsage(cmd)
		}
		if tokens[1] >= s.maxWrite() {
			return false, s.fdbError("Key outside legal range", 2004)
		}
		return s.mutate(mutation{clear: true, begin: tokens[1], end: tokens[1] + "\x00"})
	case "clearrange":
		if len(tokens) != 2 && len(tokens) != 3 {
			return s.kvUsage(cmd)
		}
		begin, end := tokens[1], strinc(tokens[1])
		if len(tokens) == 3 {
			end = tokens[2]
		}
		if end > s.maxWrite() {
			return false, s.fdbError("Key outside legal range", 2004)
		}
		return s.mutate(mutation{clear: true, begin: begin, end: end})
	case "get":
		if len(tokens) != 2 {
			return s.kvUsage(cmd)
		}
		if tokens[1] >= s.maxRead() {
			return false, s.fdbError("Key outside legal range", 2004)
		}
		got, err := s.readRange(tokens[1], tokens[1]+"\x00")
		if err != nil {
			return false, err
		}
		v, found := got[tokens[1]]
		if found {
			fmt.Fprintf(s.stdout, "`%s' is `%s'\n", printable(tokens[1]), printable(string(v)))
		} else {
			fmt.Fprintf(s.stdout, "`%s': not found\n", printable(tokens[1]))
		}
		return true, nil
	case "getrange", "getrangekeys":
		return s.getRange(tokens)
	}
	return false, nil
}

// write commits one autocommit transaction once the database accepts commits, and prints
// "Committed (<version>)" as commitTransaction does.
func (s *session) write(apply func(now time.Time) int64) (bool, error) {
	var version int64
	if err := s.waitUntil(func(now time.Time) bool {
		if !s.c.available(now) {
			return false
		}
		version = apply(now)
		return true
	}); err != nil {
		return false, err
	}
	fmt.Fprintf(s.stdout, "Committed (%d)\n", version)
	return true, nil
}

// option is fdbcli.cpp's `option` command over FdbOptions::setOption.
func (s *session) option(tokens []string) (bool, error) {
	if len(tokens) == 2 || len(tokens) > 4 {
		return s.kvUsage("option")
	}
	if len(tokens) == 1 {
		if len(s.opts()) == 0 {
			fmt.Fprintf(s.stderr, "There are no options enabled\n")
			return true, nil
		}
		fmt.Fprintf(s.stdout, "\nCurrently enabled options:\n\n")
		for _, k := range sortedKeys(s.opts()) {
			fmt.Fprintf(s.stdout, "%s\n", k)
		}
		fmt.Fprintf(s.stdout, "\n")
		return true, nil
	}
	var on bool
	switch strings.ToLower(tokens[1]) {
	case "on":
		on = true
	case "off":
		if len(tokens) > 3 {
			fmt.Fprintf(s.stderr, "ERROR: Cannot specify option argument when turning option off\n")
			return false, nil
		}
	default:
		fmt.Fprintf(s.stderr, "ERROR: Invalid option state `%s': option must be turned `on' or `off'\n", formatToken(tokens[1]))
		return false, nil
	}
	name := tokens[2]
	if !transactionOptions[name] {
		fmt.Fprintf(s.stderr, "ERROR: invalid option '%s'. Try `help options' for a list of available options.\n", name)
		return false, s.fdbError("Option not valid in this context", 2007)
	}
	if s.options == nil {
		s.options = map[string]bool{}
	}
	// Inside a transaction the option applies to it alone (fdbcli's activeOptions).
	opts := s.opts()
	if on {
		opts[name] = true
	} else {
		delete(opts, name)
	}
	state := "disabled"
	if on {
		state = "enabled"
	}
	fmt.Fprintf(s.stdout, "Option %s for all transactions\n", state)
	return true, nil
}

// getRange is getrange/getrangekeys: LIMIT defaults to 25, an omitted ENDKEY covers every key
// starting with BEGINKEY (fdbcli.cpp).
func (s *session) getRange(tokens []string) (bool, error) {
	cmd := tokens[0]
	if len(tokens) < 2 || len(tokens) > 4 {
		return s.kvUsage(cmd)
	}
	limit := 25
	if len(tokens) == 4 {
		n := 0
		if len(tokens[3]) > 9 {
			fmt.Fprintf(s.stderr, "ERROR: bad limit\n")
			return false, nil
		}
		for _, ch := range tokens[3] {
			if ch < '0' || ch > '9' {
				fmt.Fprintf(s.stderr, "ERROR: bad limit\n")
				return false, nil
			}
			n = n*10 + int(ch-'0')
		}
		limit = n
	}
	begin := tokens[1]
	var end string
	switch {
	case len(tokens) >= 3:
		end = tokens[2]
	case begin == "":
		end = normalKeysEnd
	case begin == normalKeysEnd:
		end = systemKeysEnd
	default:
		end = strinc(begin)
	}
	if end > s.maxRead() || begin >= s.maxRead() {
		return false, s.fdbError("Key outside legal range", 2004)
	}
	vals, err := s.readRange(begin, end)
	if err != nil {
		return false, err
	}
	var keys []string
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > limit {
		keys = keys[:limit]
	}
	fmt.Fprintf(s.stdout, "\nRange limited to %d keys\n", limit)
	for _, k := range keys {
		if cmd == "getrangekeys" {
			fmt.Fprintf(s.stdout, "`%s'\n", printable(k))
		} else {
			fmt.Fprintf(s.stdout, "`%s' is `%s'\n", printable(k), printable(string(vals[k])))
		}
	}
	fmt.Fprintf(s.stdout, "\n")
	return true, nil
}

// strinc is the first key after every key starting with k (flow strinc): drop trailing \xff
// bytes and increment the last byte.
func strinc(k string) string {
	b := []byte(strings.TrimRight(k, "\xff"))
	if len(b) == 0 {
		return normalKeysEnd
	}
	b[len(b)-1]++
	return string(b)
}

// printable is StringRef::printable (flow/include/flow/Traceable.h): bytes outside 32..126 as
// \xHH, a backslash doubled.
func printable(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			sb.WriteString(`\\`)
		case c < 32 || c > 126:
			fmt.Fprintf(&sb, `\x%02x`, c)
		default:
			sb.WriteByte(c)
		}
	}
	return sb.String()
}

// KV returns the keys with prefix and their values (what the operator reads with a range read
// of its maintenance prefix, fdbclient/admin_client.go GetProcessesUnderMaintenance).
func (c *Cluster) KV(prefix string) map[string][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range c.kv {
		if strings.HasPrefix(k, prefix) {
			out[k] = append([]byte(nil), v...)
		}
	}
	return out
}

// ClearKeys clears keys in one transaction, logged as client (the operator's
// RemoveProcessesUnderMaintenance).
func (c *Cluster) ClearKeys(client string, keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ms []mutation
	for _, k := range keys {
		ms = append(ms, mutation{clear: true, begin: k, end: k + "\x00"})
	}
	c.applyLocked(c.clock.Now(), ms)
	c.log = append(c.log, LogEntry{Time: c.clock.Now(), Client: client, Command: "clear " + strings.Join(keys, " "), OK: true})
}
