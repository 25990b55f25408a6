package fdbsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// errTimeout ends a session whose --timeout ran out.
var errTimeout = errors.New("timeout")

// pollStep is how often a command waiting on the cluster looks again (a transaction's retry).
const pollStep = 100 * time.Millisecond

// longDelay is fdbcli's timeWarning(5.0, ...) per line (fdbcli.actor.cpp).
const longDelay = 5 * time.Second

// knownCommands are the commands of fdbcli 7.3's help map (the CommandFactory registrations in
// fdbcli/*.actor.cpp and the built-ins of fdbcli.actor.cpp). A command in this list that the
// model does not implement fails with a line saying so, rather than pretending to work.
var knownCommands = []string{
	"advanceversion", "audit_storage", "begin", "blobkey", "blobrange", "blobrestore", "cache_range",
	"changefeed", "checkall", "clear", "clearrange", "commit", "configure", "consistencycheck",
	"consistencyscan", "coordinators", "createtenant", "datadistribution", "defaulttenant",
	"deletetenant", "exclude", "exit", "expensive_data_check", "fileconfigure", "force_recovery_with_data_loss",
	"get", "get_audit_status", "getrange", "getrangekeys", "gettenant", "getversion", "help", "hotrange",
	"idempotencyids", "include", "kill", "listtenants", "location_metadata", "lock", "maintenance",
	"metacluster", "option", "profile", "quota", "quit", "rangeconfig", "renametenant", "reset", "rollback",
	"set", "setclass", "sleep", "snapshot", "status", "suspend", "tenant", "tenantgroup", "throttle",
	"triggerddteaminfolog", "tssq", "unlock", "usetenant", "versionepoch", "waitconnected", "waitopen",
	"writemode",
}

// usages are the usage lines of the modelled commands (their CommandHelp in fdbcli/*.actor.cpp).
var usages = map[string]string{
	"status":       "status [minimal|details|json]",
	"kill":         "kill all|list|<ADDRESS...>",
	"maintenance":  "maintenance [on|off] [ZONEID] [SECONDS]",
	"sleep":        "sleep <SECONDS>",
	"coordinators": "coordinators auto|<ADDRESS>+ [description=new_cluster_description]",
	"include": "include all|[<ADDRESS...>] [locality_dcid:<excludedcid>] [locality_zoneid:<excludezoneid>] " +
		"[locality_machineid:<excludemachineid>] [locality_processid:<excludeprocessid>] or any locality data",
}

// session is one fdbcli process: its options, its output and what it remembers between commands.
type session struct {
	c              *Cluster
	ctx            context.Context
	client         string
	stdout, stderr io.Writer
	deadline       time.Time // zero: no --timeout
	lineStart      time.Time
	warned         bool // the long-delay warning of this line was printed or cancelled
	// addressInterface is the kill command's list, filled by a bare `kill` (KillCommand.actor.cpp).
	addressInterface []string
	// pendingKill are kill requests a pre-7.3 `kill <ADDRESS>` queued but did not wait to send:
	// they leave when the session goes on (the next command or a wait) and are lost when the
	// session ends first (release-7.1 fdbcli/KillCommand.actor.cpp: no delay after rebootWorker).
	pendingKill []string
	// writeMode is `writemode on`; options are the transaction options set with `option on`
	// (fdbcli.cpp globalOptions), by upper-case name.
	writeMode bool
	options   map[string]bool
	// tx is the transaction a `begin` opened (txn.go); nil in autocommit mode.
	tx *txn
}

// parseOptions reads fdbcli's options (fdbcli.actor.cpp CLIOptions); done means the process
// ends with code before connecting (usage, version, bad options).
func parseOptions(args []string, stdout, stderr io.Writer) (exec string, timeout uint64, code int, done bool) {
	var execOpt *string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name := a
		if strings.HasPrefix(a, "--") {
			// CSimpleOpt with SO_O_HYPHEN_TO_UNDERSCORE matches --a_b as --a-b.
			name = "--" + strings.ReplaceAll(a[2:], "_", "-")
		}
		takesValue := false
		switch name {
		case "-C", "--cluster-file", "-d", "--log-dir", "--log-group", "--trace-format", "--api-version",
			"--memory", "--status-from-json", "--tls-plugin", "--tls-certificate-file", "--tls-key-file",
			"--tls-ca-file", "--tls-password", "--tls-verify-peers", "--timeout", "--exec":
			takesValue = true
		case "--log", "--no-status", "--no-hints", "--debug-tls", "--use-future-protocol-version", "--build-flags":
		case "-h", "-?", "--help", "--version", "-v":
			fmt.Fprintf(stdout, "FoundationDB CLI %s (simulated)\n", Version)
			return "", 0, 0, true
		default:
			if strings.HasPrefix(name, "--knob-") {
				takesValue = true
				break
			}
			// fdbcli.actor.cpp processArg: a parse error prints the usage and exits 1.
			fmt.Fprintf(stdout, "FoundationDB CLI %s (v%s)\nusage: fdbcli [OPTIONS]\n\n", Version, Version)
			if !strings.HasPrefix(a, "-") {
				fmt.Fprintf(stderr, "fdbsim: unexpected argument %q (fdbcli would ignore it)\n", a)
			}
			return "", 0, 1, true
		}
		if takesValue {
			if i+1 >= len(args) {
				fmt.Fprintf(stdout, "FoundationDB CLI %s (v%s)\nusage: fdbcli [OPTIONS]\n\n", Version, Version)
				return "", 0, 1, true
			}
			i++
			v := args[i]
			switch name {
			case "--timeout":
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					fmt.Fprintf(stderr, "ERROR: invalid timeout %s\n", v)
					return "", 0, 1, true
				}
				timeout = n
			case "--exec":
				execOpt = &v
			}
		}
	}
	if timeout != 0 && execOpt == nil {
		fmt.Fprintf(stderr, "ERROR: --timeout may only be specified with --exec\n")
		return "", 0, 1, true
	}
	if execOpt == nil {
		fmt.Fprintf(stderr, "fdbsim: the interactive shell is not modelled; use --exec\n")
		return "", 0, 1, true
	}
	return *execOpt, timeout, 0, false
}

// Run runs fdbcli with args (without the program name) against the model and returns its exit
// code. getenv supplies the environment (FDB_CLUSTER_FILE and TLS settings are accepted as the
// real client accepts them; the model does not read files).
//
// Stricter than fdbcli: positional arguments (which fdbcli ignores) and the interactive mode
// (no --exec) are refused, since a caller of this simulator never needs them.
func (c *Cluster) Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return c.RunAs(ctx, "", args, stdout, stderr)
}

// RunAs is Run with the caller named in the command log (a pod, or the operator).
func (c *Cluster) RunAs(ctx context.Context, client string, args []string, stdout, stderr io.Writer) int {
	exec, timeout, code, done := parseOptions(args, stdout, stderr)
	if done {
		return code
	}
	s := &session{c: c, ctx: ctx, client: client, stdout: stdout, stderr: stderr}
	start := c.clock.Now()
	if timeout > 0 {
		s.deadline = start.Add(time.Duration(timeout) * time.Second)
	}
	code, err := s.runLine(exec)
	if errors.Is(err, errTimeout) {
		// timeExit (fdbcli.actor.cpp): the network stops; work already sent to the cluster goes on.
		fmt.Fprintf(stderr, "Specified timeout reached -- exiting...\n")
		return 1
	}
	if err != nil {
		return 1
	}
	return code
}

// wait lets d pass on the model's clock, bounded by --timeout, and prints the line's long-delay
// warning when the line has run for 5 seconds.
func (s *session) wait(d time.Duration) error {
	s.flushKills()
	now := s.c.clock.Now()
	if !s.deadline.IsZero() && !now.Add(d).Before(s.deadline) {
		if err := s.c.clock.Sleep(s.ctx, s.deadline.Sub(now)); err != nil {
			return err
		}
		s.checkWarn()
		return errTimeout
	}
	if err := s.c.clock.Sleep(s.ctx, d); err != nil {
		return err
	}
	s.checkWarn()
	return nil
}

// checkWarn: checkStatus(timeWarning(5.0, ...)) prints the warning on stderr, then the minimal
// status on stdout (fdbcli.actor.cpp checkStatus; StatusCommand.actor.cpp printStatus).
func (s *session) checkWarn() {
	if s.warned || s.c.clock.Now().Sub(s.lineStart) < longDelay {
		return
	}
	s.warned = true
	fmt.Fprint(s.stderr, "\nWARNING: Long delay (Ctrl-C to interrupt)\n")
	s.c.mu.Lock()
	now := s.c.clock.Now()
	s.c.advance(now)
	avail := s.c.available(now)
	_, healthy, _, _ := s.c.storageState()
	s.c.mu.Unlock()
	switch {
	case !avail:
		fmt.Fprint(s.stdout, "\nThe database is unavailable; type `status' for more information.\n\n")
	case healthy:
		fmt.Fprint(s.stdout, "\nThe database is available.\n\n")
	default:
		fmt.Fprint(s.stdout, "\nThe database is available, but has issues (type 'status' for more information).\n\n")
	}
}

// waitUntil retries until cond holds (a transaction retrying while the cluster cannot serve it).
func (s *session) waitUntil(cond func(now time.Time) bool) error {
	for {
		s.c.mu.Lock()
		now := s.c.clock.Now()
		s.c.advance(now)
		ok := cond(now)
		s.c.mu.Unlock()
		if ok {
			return nil
		}
		if err := s.wait(pollStep); err != nil {
			return err
		}
	}
}

func (s *session) record(cmd string, ok bool) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.log = append(s.c.log, LogEntry{Time: s.c.clock.Now(), Client: s.client, Command: cmd, OK: ok})
}

// runLine runs one --exec line as fdbcli.actor.cpp's cli loop does.
func (s *session) runLine(line string) (int, error) {
	s.lineStart = s.c.clock.Now()
	parsed, malformed, partial := parseLine(line)
	if (malformed || partial) && len(parsed) > 0 {
		last := parsed[len(parsed)-1]
		parsed[len(parsed)-1] = append([]string{"parse_error"}, last...)
	}
	multi := len(parsed) > 1
	isError := false
	for _, tokens := range parsed {
		if isError {
			fmt.Fprintf(s.stdout, "WARNING: the previous command failed, the remaining commands will not be executed.\n")
			break
		}
		if len(tokens) == 0 {
			continue
		}
		if tokens[0] == "parse_error" {
			fmt.Fprintf(s.stderr, "ERROR: Command failed to completely parse.\n")
			if len(tokens) > 1 {
				fmt.Fprintf(s.stderr, "ERROR: Not running partial or malformed command:")
				for _, t := range tokens[1:] {
					fmt.Fprintf(s.stdout, " %s", formatToken(t))
				}
				fmt.Fprintf(s.stdout, "\n")
			}
			isError = true
			continue
		}
		if multi {
			fmt.Fprintf(s.stdout, ">>>")
			for _, t := range tokens {
				fmt.Fprintf(s.stdout, " %s", formatToken(t))
			}
			fmt.Fprintf(s.stdout, "\n")
		}
		if !slices.Contains(knownCommands, tokens[0]) {
			fmt.Fprintf(s.stderr, "ERROR: Unknown command `%s'. Try `help'?\n", tokens[0])
			s.record(strings.Join(tokens, " "), false)
			isError = true
			continue
		}
		if tokens[0] == "exit" || tokens[0] == "quit" {
			return 0, nil
		}
		s.flushKills()
		ok, err := s.command(tokens)
		s.record(strings.Join(tokens, " "), ok && err == nil)
		if err != nil {
			s.rollbackOnError(err)
			return 1, err
		}
		if !ok {
			isError = true
		}
	}
	if isError {
		return 1, nil
	}
	return 0, nil
}

func (s *session) printUsage(cmd string) {
	if u, ok := usages[cmd]; ok {
		fmt.Fprintf(s.stdout, "Usage: %s\n", u)
		return
	}
	fmt.Fprintf(s.stderr, "ERROR: Unknown command `%s'\n", cmd)
}

func (s *session) command(tokens []string) (bool, error) {
	switch tokens[0] {
	case "status":
		return s.status(tokens)
	case "kill":
		return s.kill(tokens)
	case "maintenance":
		return s.maintenance(tokens)
	case "exclude":
		return s.exclude(tokens)
	case "include":
		return s.include(tokens)
	case "coordinators":
		return s.coordinatorsCmd(tokens)
	case "writemode", "option", "set", "get", "clear", "clearrange", "getrange", "getrangekeys":
		return s.kvCommand(tokens)
	case "begin", "commit", "rollback", "reset":
		return s.txnCommand(tokens)
	case "sleep":
		// fdbcli.actor.cpp: sleep <SECONDS>, parsed with sscanf("%lf%n") over the whole token.
		if len(tokens) != 2 {
			s.printUsage("sleep")
			return false, nil
		}
		v, ok := parseDouble(tokens[1])
		if !ok {
			s.printUsage("sleep")
			return false, nil
		}
		return true, s.wait(time.Duration(v * float64(time.Second)))
	}
	fmt.Fprintf(s.stderr, "fdbsim: command `%s' is not modelled by the simulator\n", tokens[0])
	return false, nil
}

// parseDouble is sscanf("%lf%n") that must consume the whole token.
func parseDouble(t string) (float64, bool) {
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || strings.ContainsAny(t, "xX_") || strings.EqualFold(t, "nan") {
		return 0, false
	}
	return v, true
}

// status: StatusCommand.actor.cpp statusCommandActor. The status of a cluster without a
// reachable cluster controller is still printed (partial); it takes the client's status timeout.
func (s *session) status(tokens []string) (bool, error) {
	level := "normal"
	switch {
	case len(tokens) == 1:
	case len(tokens) == 2 && slices.Contains([]string{"details", "minimal", "json"}, tokens[1]):
		level = tokens[1]
	default:
		s.printUsage("status")
		return false, nil
	}
	s.c.mu.Lock()
	now := s.c.clock.Now()
	s.c.advance(now)
	reachable := s.c.ccReachable()
	s.c.mu.Unlock()
	if !reachable {
		// StatusClient gives up on the cluster controller after its timeout (2 s,
		// "Unable to locate a cluster controller within 2 seconds").
		if err := s.wait(2 * time.Second); err != nil {
			return false, err
		}
	}
	s.c.mu.Lock()
	now = s.c.clock.Now()
	s.c.advance(now)
	var out string
	switch level {
	case "json":
		out = string(s.c.statusJSON(now)) + "\n"
	case "minimal":
		if !s.c.available(now) {
			out = "The database is unavailable; type `status' for more information.\n"
		} else if _, healthy, _, _ := s.c.storageState(); healthy {
			out = "The database is available.\n"
		} else {
			out = "The database is available, but has issues (type 'status' for more information).\n"
		}
	default:
		out = s.c.statusText(now)
	}
	s.c.mu.Unlock()
	fmt.Fprint(s.stdout, out)
	return true, nil
}

// kill: KillCommand.actor.cpp killCommandActor.
func (s *session) kill(tokens []string) (bool, error) {
	if len(tokens) == 1 {
		// getWorkerInterfaces asks the cluster controller for the workers.
		var addrs []string
		err := s.waitUntil(func(time.Time) bool {
			if !s.c.ccReachable() {
				return false
			}
			addrs = addrs[:0]
			for _, p := range s.c.procs {
				if p.up {
					// fdbcli/Util.actor.cpp addInterfacesFromKVs keys the list by the worker's
					// address with any ":tls" suffix removed, so `kill ip:port:tls` is not
					// recognised and `kill ip:port` names a TLS process.
					addrs = append(addrs, strings.TrimSuffix(p.spec.Address, ":tls"))
				}
			}
			return true
		})
		if err != nil {
			return false, err
		}
		slices.Sort(addrs) // a std::map keyed by address
		s.addressInterface = addrs
	}
	if len(tokens) == 1 || tokens[1] == "list" {
		switch len(s.addressInterface) {
		case 0:
			fmt.Fprintf(s.stdout, "\nNo addresses can be killed.\n")
		case 1:
			fmt.Fprintf(s.stdout, "\nThe following address can be killed:\n")
		default:
			fmt.Fprintf(s.stdout, "\nThe following %d addresses can be killed:\n", len(s.addressInterface))
		}
		for _, a := range s.addressInterface {
			fmt.Fprintf(s.stdout, "%s\n", a)
		}
		fmt.Fprintf(s.stdout, "\n")
		return true, nil
	}
	if tokens[1] == "all" {
		if len(s.addressInterface) == 0 {
			fmt.Fprintf(s.stderr, "ERROR: no processes to kill. You must run the `kill’ command before running `kill all’.\n")
			return false, nil
		}
		s.c.mu.Lock()
		s.c.kill(s.addressInterface)
		s.c.mu.Unlock()
		fmt.Fprintf(s.stdout, "Attempted to kill %d processes\n", len(s.addressInterface))
		return true, nil
	}
	for _, a := range tokens[1:] {
		if !slices.Contains(s.addressInterface, a) {
			fmt.Fprintf(s.stderr, "ERROR: process `%s' not recognized.\n", a)
			return false, nil
		}
	}
	if !versionAtLeast(s.c.cfg.Version, 7, 3) {
		// release-7.1 KillCommand.actor.cpp returns as soon as rebootWorker is called.
		s.pendingKill = append(s.pendingKill, tokens[1:]...)
		fmt.Fprintf(s.stdout, "Attempted to kill %d processes\n", len(tokens)-1)
		return true, nil
	}
	s.c.mu.Lock()
	s.c.kill(tokens[1:])
	s.c.mu.Unlock()
	// 7.3: "delay in case the network queue is not flush before the client exits"
	if err := s.wait(s.c.cfg.KillFlush); err != nil {
		return false, err
	}
	fmt.Fprintf(s.stdout, "Attempted to kill %d processes\n", len(tokens)-1)
	return true, nil
}

// flushKills delivers the kill requests a pre-7.3 kill queued (see pendingKill).
func (s *session) flushKills() {
	if len(s.pendingKill) == 0 {
		return
	}
	s.c.mu.Lock()
	s.c.kill(s.pendingKill)
	s.c.mu.Unlock()
	s.pendingKill = nil
}

// versionAtLeast reports whether version v (major.minor.patch) is at least major.minor; an
// unparseable version counts as older. The engine has its own copy on purpose: the simulator
// is an independent model and imports nothing of the engine.
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

// maintenance: MaintenanceCommand.actor.cpp. `on` sets the one healthy zone (replacing any
// other), `off` clears it; both are transactions, which wait while the database is unavailable.
func (s *session) maintenance(tokens []string) (bool, error) {
	switch {
	case len(tokens) == 1:
		var zone string
		var left time.Duration
		if err := s.waitUntil(func(now time.Time) bool {
			if !s.c.available(now) {
				return false
			}
			zone, left = s.c.maintZone, s.c.maintUntil.Sub(now)
			return true
		}); err != nil {
			return false, err
		}
		if zone == "" || left <= 0 {
			fmt.Fprintf(s.stdout, "No ongoing maintenance.\n")
		} else {
			fmt.Fprintf(s.stdout, "Maintenance for zone %s will continue for %d seconds.\n", zone, int64(left.Seconds()))
		}
		return true, nil
	case len(tokens) == 2 && tokens[1] == "off":
		return true, s.waitUntil(func(now time.Time) bool {
			if !s.c.available(now) {
				return false
			}
			s.c.setMaintenance("", time.Time{})
			return true
		})
	case len(tokens) == 4 && tokens[1] == "on":
		secs, ok := parseDouble(tokens[3])
		if !ok {
			s.printUsage("maintenance")
			return false, nil
		}
		return true, s.waitUntil(func(now time.Time) bool {
			if !s.c.available(now) {
				return false
			}
			if secs <= 0 {
				s.c.setMaintenance("", time.Time{})
			} else {
				s.c.setMaintenance(tokens[2], now.Add(time.Duration(secs*float64(time.Second))))
			}
			return true
		})
	}
	s.printUsage("maintenance")
	return false, nil
}

// exclusionKey parses an exclude/include address argument as AddressExclusion::parse does: an
// IP (whole machine) or IP:port; the ":tls" suffix is not part of an exclusion.
func exclusionKey(t string) (string, bool) {
	if strings.HasSuffix(t, ":tls") {
		return "", false
	}
	if validAddress(t) || net.ParseIP(t) != nil {
		return t, true
	}
	return "", false
}

// exclude: ExcludeCommand.actor.cpp excludeCommandActor.
func (s *session) exclude(tokens []string) (bool, error) {
	if len(tokens) == 1 {
		s.c.mu.Lock()
		var addrs, locs []string
		for _, e := range s.c.exclusions {
			if strings.HasPrefix(e.key, "locality_") {
				locs = append(locs, e.key)
			} else {
				addrs = append(addrs, e.key)
			}
		}
		s.c.mu.Unlock()
		if len(addrs)+len(locs) == 0 {
			fmt.Fprintf(s.stdout, "There are currently no servers or localities excluded from the database.\n"+
				"To learn how to exclude a server, type `help exclude'.\n")
			return true, nil
		}
		fmt.Fprintf(s.stdout, "There are currently %d servers or localities being excluded from the database:\n", len(addrs)+len(locs))
		for _, e := range append(addrs, locs...) {
			fmt.Fprintf(s.stdout, "  %s\n", e)
		}
		fmt.Fprintf(s.stdout, "To find out whether it is safe to remove one or more of these\n"+
			"servers from the cluster, type `exclude <addresses>'.\n"+
			"To return one of these servers to the cluster, type `include <addresses>'.\n\n")
		fmt.Fprintf(s.stdout, "There are currently 0 servers or localities marked as failed in the database:\n")
		return true, nil
	}
	force, noWait, failed := false, false, false
	var keys []string
	for _, t := range tokens[1:] {
		switch {
		case t == "FORCE":
			force = true
		case t == "no_wait":
			noWait = true
		case t == "failed":
			failed = true
		case strings.HasPrefix(t, "locality_") && strings.Contains(t, ":"):
			keys = append(keys, t)
		default:
			k, ok := exclusionKey(t)
			if !ok {
				fmt.Fprintf(s.stderr, "ERROR: '%s' is neither a valid network endpoint address nor a locality\n", t)
				if strings.Contains(t, ":tls") {
					fmt.Fprintf(s.stdout, "        Do not include the `:tls' suffix when naming a process\n")
				}
				// An invalid address is reported but the command succeeds (returns true).
				return true, nil
			}
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		fmt.Fprintf(s.stderr, "ERROR: At least one valid network endpoint address or a locality must be provided\n")
		return false, nil
	}
	if failed {
		fmt.Fprintf(s.stderr, "fdbsim: `exclude failed' is not modelled by the simulator\n")
		return false, nil
	}
	refused := false
	if err := s.waitUntil(func(now time.Time) bool {
		if !s.c.available(now) {
			return false
		}
		// SpecialKeySpace.actor.cpp checkExclusion: without FORCE, refuse when every storage
		// server would be excluded.
		if !force {
			total, excl := 0, 0
			for _, p := range s.c.procs {
				if p.spec.Class != ClassStorage {
					continue
				}
				total++
				if _, ex := s.c.excludedBy(p); ex || matchesAny(s.c, p, keys) {
					excl++
				}
			}
			if total > 0 && excl == total {
				refused = true
				return true
			}
		}
		for _, k := range keys {
			if !slices.ContainsFunc(s.c.exclusions, func(e exclusion) bool { return e.key == k }) {
				s.c.exclusions = append(s.c.exclusions, exclusion{key: k, at: now})
				s.c.excludeLogs(now)
			}
		}
		return true
	}); err != nil {
		return false, err
	}
	if refused {
		fmt.Fprintf(s.stderr, "ERROR: This exclude may cause the total available space in the cluster to drop below 10%%.\n"+
			"Type `exclude FORCE failed <ADDRESS...>' to exclude without performing safety checks.\n")
		return false, nil
	}
	if !noWait {
		fmt.Fprintf(s.stdout, "Waiting for state to be removed from all excluded servers. This may take a while.\n")
		fmt.Fprintf(s.stdout, "(Interrupting this wait with CTRL+C will not cancel the data movement.)\n")
	}
	s.warned = true // warn.cancel()
	inProgress := map[string]bool{}
	check := func(now time.Time) bool {
		clear(inProgress)
		for _, p := range s.c.procs {
			if !matchesAny(s.c, p, keys) {
				continue
			}
			if (p.spec.Class == ClassStorage && !p.removedData) || slices.Contains(s.c.txnRoles[p.spec.ID], "log") {
				inProgress[p.spec.ID] = true
			}
		}
		return len(inProgress) == 0
	}
	if noWait {
		s.c.mu.Lock()
		s.c.advance(s.c.clock.Now())
		check(s.c.clock.Now())
		s.c.mu.Unlock()
	} else if err := s.waitUntil(check); err != nil {
		return false, err
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	// The exclusion vector: each address as given, each locality resolved to the addresses of
	// the workers that have it (fdbcli's getAddressesByLocality, a std::set of AddressExclusion:
	// IP:port without the ":tls" suffix, ordered by IP then port). A locality no worker has is
	// only warned about.
	type addrExcl struct{ ip, port string }
	var vector []addrExcl
	var noMatch []string
	for _, k := range keys {
		if !strings.HasPrefix(k, "locality_") {
			ip, port, err := net.SplitHostPort(k)
			if err != nil {
				ip, port = k, ""
			}
			vector = append(vector, addrExcl{ip, port})
			continue
		}
		var found []addrExcl
		for _, p := range s.c.procs {
			if p.up && matchesAny(s.c, p, []string{k}) {
				ip, port, _ := net.SplitHostPort(strings.TrimSuffix(p.spec.Address, ":tls"))
				if !slices.Contains(found, addrExcl{ip, port}) {
					found = append(found, addrExcl{ip, port})
				}
			}
		}
		slices.SortFunc(found, func(a, b addrExcl) int {
			if c := slices.Compare(net.ParseIP(a.ip).To16(), net.ParseIP(b.ip).To16()); c != 0 {
				return c
			}
			pa, _ := strconv.Atoi(a.port)
			pb, _ := strconv.Atoi(b.port)
			return pa - pb
		})
		if len(found) == 0 {
			noMatch = append(noMatch, k)
		}
		vector = append(vector, found...)
	}
	// excludes: AddressExclusion::excludes, a whole machine matches any port of its IP.
	excludes := func(x addrExcl, p *process) bool {
		ip, port, _ := net.SplitHostPort(strings.TrimSuffix(p.spec.Address, ":tls"))
		return x.ip == ip && (x.port == "" || x.port == port)
	}
	for _, x := range vector {
		// Absent: no worker on that IP (or that IP:port).
		absent := !slices.ContainsFunc(s.c.procs, func(p *process) bool { return p.up && excludes(x, p) })
		// In progress: an address of the in_progress_exclusion range this exclusion covers.
		busy := slices.ContainsFunc(s.c.procs, func(p *process) bool { return inProgress[p.spec.ID] && excludes(x, p) })
		whole := x.port == ""
		k := x.ip
		if !whole {
			k = net.JoinHostPort(x.ip, x.port)
		}
		switch {
		case absent && whole:
			fmt.Fprintf(s.stderr, "  %s(Whole machine)  ---- WARNING: Missing from cluster!Be sure that you excluded the correct machines before removing them from the cluster!\n", k)
		case absent:
			fmt.Fprintf(s.stderr, "  %s  ---- WARNING: Missing from cluster! Be sure that you excluded the correct processes before removing them from the cluster!\n", k)
		case busy && whole:
			fmt.Fprintf(s.stderr, "  %s(Whole machine)  ---- WARNING: Exclusion in progress! It is not safe to remove this machine from the cluster\n", k)
		case busy:
			fmt.Fprintf(s.stderr, "  %s  ---- WARNING: Exclusion in progress! It is not safe to remove this process from the cluster\n", k)
		case whole:
			fmt.Fprintf(s.stdout, "  %s(Whole machine)  ---- Successfully excluded. It is now safe to remove this machine from the cluster.\n", k)
		default:
			fmt.Fprintf(s.stdout, "  %s  ---- Successfully excluded. It is now safe to remove this process from the cluster.\n", k)
		}
	}
	for _, k := range noMatch {
		fmt.Fprintf(s.stderr, "  %s  ---- WARNING: Currently no servers found with this locality match! Be sure that you excluded the correct locality.\n", k)
	}
	// checkForCoordinators: a coordinator whose IP:port or IP is in the exclusion vector, the
	// localities' addresses included.
	found := false
	for _, a := range s.c.coordinators {
		// A hostname entry is checked by the address it resolves to (checkForCoordinators
		// resolves the connection string's hostnames).
		ip, port, _ := net.SplitHostPort(strings.TrimSuffix(s.c.resolve(a), ":tls"))
		if slices.Contains(vector, addrExcl{ip, port}) || slices.Contains(vector, addrExcl{ip, ""}) {
			fmt.Fprintf(s.stderr, "WARNING: %s is a coordinator!\n", a)
			found = true
		}
	}
	if found {
		fmt.Fprintf(s.stdout, "Type `help coordinators' for information on how to change the\ncluster's coordination servers before removing them.\n")
	}
	return true, nil
}

// excludeLogs: an excluded process keeps a current log role until a recovery recruits logs
// elsewhere; the cluster controller starts one (ClusterController.actor.cpp, betterMasterExists).
func (c *Cluster) excludeLogs(now time.Time) {
	for id, roles := range c.txnRoles {
		if p := c.byID(id); p != nil && len(roles) > 0 {
			if _, ex := c.excludedBy(p); ex {
				c.startRecovery(now, true)
				return
			}
		}
	}
}

func matchesAny(c *Cluster, p *process, keys []string) bool {
	addr := strings.TrimSuffix(p.spec.Address, ":tls")
	for _, k := range keys {
		if k == addr || k == ipOf(p.spec.Address) {
			return true
		}
		if name, val, ok := strings.Cut(strings.TrimPrefix(k, "locality_"), ":"); ok && strings.HasPrefix(k, "locality_") {
			if v, has := c.locality(p)[name]; has && v == val {
				return true
			}
		}
	}
	return false
}

// include: IncludeCommand.actor.cpp. A whole-IP include also clears that IP's ip:port entries.
func (s *session) include(tokens []string) (bool, error) {
	if len(tokens) < 2 {
		s.printUsage("include")
		return false, nil
	}
	all, failed := false, false
	var keys []string
	for _, t := range tokens[1:] {
		switch {
		case t == "all":
			all = true
		case t == "failed":
			failed = true
		case strings.HasPrefix(t, "locality_") && strings.Contains(t, ":"):
			keys = append(keys, t)
		default:
			k, ok := exclusionKey(t)
			if !ok {
				fmt.Fprintf(s.stderr, "ERROR: '%s' is neither a valid network endpoint address nor a locality\n", t)
				if strings.Contains(t, ":tls") {
					fmt.Fprintf(s.stdout, "        Do not include the `:tls' suffix when naming a process\n")
				}
				return false, nil
			}
			keys = append(keys, k)
		}
	}
	if failed {
		// Failed exclusions are not modelled; nothing is marked failed, so there is nothing to clear.
		return true, nil
	}
	return true, s.waitUntil(func(now time.Time) bool {
		if !s.c.available(now) {
			return false
		}
		s.c.exclusions = slices.DeleteFunc(s.c.exclusions, func(e exclusion) bool {
			if all {
				return true
			}
			for _, k := range keys {
				if e.key == k || (net.ParseIP(k) != nil && strings.HasPrefix(e.key, k+":")) {
					return true
				}
			}
			return false
		})
		for _, p := range s.c.procs {
			if _, ex := s.c.excludedBy(p); !ex {
				p.removedData = false
			}
		}
		return true
	})
}

// coordinatorsCmd: CoordinatorsCommand.actor.cpp. Changing coordinators needs every new address
// to be a running process (NOT_COORDINATORS otherwise); the same set is "No change".
func (s *session) coordinatorsCmd(tokens []string) (bool, error) {
	if len(tokens) < 2 {
		var cs []string
		if err := s.waitUntil(func(now time.Time) bool {
			if !s.c.available(now) {
				return false
			}
			cs = slices.Clone(s.c.coordinators)
			return true
		}); err != nil {
			return false, err
		}
		fmt.Fprintf(s.stdout, "Cluster description: %s\n", s.c.cfg.Description)
		fmt.Fprintf(s.stdout, "Cluster coordinators (%d): %s\n", len(cs), strings.Join(cs, ","))
		fmt.Fprintf(s.stdout, "Type `help coordinators' to learn how to change this information.\n")
		return true, nil
	}
	var addrs []string
	for _, t := range tokens[1:] {
		if strings.HasPrefix(t, "description=") || strings.HasPrefix(t, "--no-config-db") {
			fmt.Fprintf(s.stderr, "fdbsim: coordinators option %q is not modelled by the simulator\n", t)
			return false, nil
		}
		if t == "auto" && len(tokens) == 2 {
			fmt.Fprintf(s.stderr, "fdbsim: `coordinators auto' is not modelled by the simulator\n")
			return false, nil
		}
		if !validAddress(t) && !validHostname(t) {
			fmt.Fprintf(s.stderr, "ERROR: '%s' is not a valid network endpoint address\n", t)
			return true, nil
		}
		if slices.Contains(addrs, t) {
			fmt.Fprintf(s.stderr, "ERROR: passed redundant coordinators: `%s'\n", t)
			return true, nil
		}
		addrs = append(addrs, t)
	}
	msg := ""
	if err := s.waitUntil(func(now time.Time) bool {
		if !s.c.available(now) {
			return false
		}
		cur := slices.Clone(s.c.coordinators)
		want := slices.Clone(addrs)
		slices.Sort(cur)
		slices.Sort(want)
		if slices.Equal(cur, want) {
			msg = "No change (existing configuration satisfies request)\n"
			return true
		}
		for _, a := range addrs {
			if p := s.c.coordinatorProcess(a); p == nil || !p.up {
				msg = "ERROR: Coordination servers are not running on the specified network addresses\n"
				return true
			}
		}
		s.c.coordinators = addrs
		msg = "Coordination state changed\n"
		return true
	}); err != nil {
		return false, err
	}
	if strings.HasPrefix(msg, "ERROR") {
		fmt.Fprint(s.stderr, msg)
		return false, nil
	}
	fmt.Fprint(s.stdout, msg)
	return true, nil
}
