package replicated

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Command names, as used in the configuration under "commands".
const (
	CmdSequence  = "sequence"
	CmdSeed      = "seed"
	CmdPrimary   = "primary"
	CmdSecondary = "secondary"
	CmdStop      = "stop"
	CmdStatus    = "status"
)

// commandNames lists every accepted command, in documentation order.
var commandNames = []string{CmdSequence, CmdSeed, CmdPrimary, CmdSecondary, CmdStop, CmdStatus}

// Default command timeouts: role changes may replay data, the others only
// look or signal.
const (
	DefaultRoleTimeout  = 5 * time.Minute
	DefaultQueryTimeout = time.Minute
)

// DefaultPrimaries is the number of primaries when no source sets it.
const DefaultPrimaries = 1

// Command is one resolved command: argv run by exec in the pod, bounded by
// Timeout. Role commands get the DNS names of the running primaries
// appended as arguments.
type Command struct {
	Argv    []string
	Timeout time.Duration
}

// Config is the resolved configuration of a replicated application.
type Config struct {
	// Primaries is the wanted number of primaries.
	Primaries int32
	// Container to exec in ("" = the pod's only or default container).
	Container string
	// Commands by name; a missing entry is not configured.
	Commands map[string]*Command
}

// Has reports whether the named command is configured.
func (c *Config) Has(name string) bool { return c.Commands[name] != nil }

// Require refuses a configuration without the named commands (exit 2).
func (c *Config) Require(names ...string) error {
	var missing []string
	for _, n := range names {
		if !c.Has(n) {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return ops.Usagef("replicated configuration: missing required command(s) %s; set replicated.commands.<name>.argv in the config file, DBOPS_REPLICATED_CONFIG or the StatefulSet annotation %s",
			strings.Join(missing, ", "), AnnotationConfig)
	}
	return nil
}

// Layer is one configuration source as written (config file section
// "replicated", DBOPS_REPLICATED_CONFIG, the StatefulSet annotation). Unset
// fields fall through to the next source.
type Layer struct {
	Primaries *int32                   `json:"primaries,omitempty"`
	Container *string                  `json:"container,omitempty"`
	Commands  map[string]*commandLayer `json:"commands,omitempty"`
	// Source names the layer in error messages.
	Source string `json:"-"`
}

type commandLayer struct {
	// Argv nil = not set here; an empty list is an error.
	Argv []string `json:"argv"`
	// Timeout is a Go duration string ("90s") or a number of seconds.
	Timeout json.RawMessage `json:"timeout,omitempty"`
}

// ParseLayer reads a layer from JSON or YAML with the schema
//
//	primaries: 2
//	container: db
//	commands:
//	  sequence: {argv: [/bin/seq], timeout: 30s}
//	  primary:  {argv: [/bin/start-primary], timeout: 300}
//
// Unknown keys and malformed values are usage errors naming source.
func ParseLayer(data []byte, source string) (*Layer, error) {
	l := &Layer{Source: source}
	if len(bytes.TrimSpace(data)) == 0 {
		return l, nil
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, ops.Usagef("replicated configuration from %s: not valid JSON or YAML: %v", source, err)
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return l, nil
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(l); err != nil {
		return nil, ops.Usagef("replicated configuration from %s: %v (keys: primaries, container, commands.{%s}.{argv,timeout})",
			source, err, strings.Join(commandNames, ","))
	}
	if err := l.check(); err != nil {
		return nil, err
	}
	return l, nil
}

// check validates what the layer sets, so a malformed source is reported
// even when a higher one overrides it.
func (l *Layer) check() error {
	if l.Primaries != nil && *l.Primaries < 0 {
		return ops.Usagef("replicated configuration from %s: primaries must not be negative, got %d", l.Source, *l.Primaries)
	}
	for name, c := range l.Commands {
		if !slices.Contains(commandNames, name) {
			return ops.Usagef("replicated configuration from %s: unknown command %q (allowed: %s)", l.Source, name, strings.Join(commandNames, ", "))
		}
		if c == nil {
			return ops.Usagef("replicated configuration from %s: commands.%s is empty; give argv (and optionally timeout)", l.Source, name)
		}
		if c.Argv != nil {
			if len(c.Argv) == 0 || strings.TrimSpace(c.Argv[0]) == "" {
				return ops.Usagef("replicated configuration from %s: commands.%s.argv is empty; give the program and its arguments as a list", l.Source, name)
			}
		}
		if len(c.Timeout) > 0 {
			if _, err := parseTimeout(c.Timeout); err != nil {
				return ops.Usagef("replicated configuration from %s: commands.%s.timeout: %v", l.Source, name, err)
			}
		}
	}
	return nil
}

// parseTimeout accepts "90s" or 90 (seconds); it must be positive.
func parseTimeout(raw json.RawMessage) (time.Duration, error) {
	var d time.Duration
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			// A bare number in a string ("30") means seconds too.
			n, nerr := strconv.ParseFloat(s, 64)
			if nerr != nil {
				return 0, fmt.Errorf("%q is not a duration (e.g. 30s, 5m) or a number of seconds", s)
			}
			v = time.Duration(n * float64(time.Second))
		}
		d = v
	} else {
		var n float64
		if err := json.Unmarshal(raw, &n); err != nil {
			return 0, fmt.Errorf("%s is not a duration (e.g. 30s, 5m) or a number of seconds", raw)
		}
		d = time.Duration(n * float64(time.Second))
	}
	if d <= 0 {
		return 0, fmt.Errorf("must be positive, got %s", raw)
	}
	return d, nil
}

// Resolve merges layers, highest precedence first, field by field, over the
// defaults.
func Resolve(layers ...*Layer) (*Config, error) {
	cfg := &Config{Primaries: DefaultPrimaries, Commands: map[string]*Command{}}
	primariesSet, containerSet := false, false
	for _, l := range layers {
		if l == nil {
			continue
		}
		if err := l.check(); err != nil {
			return nil, err
		}
		if l.Primaries != nil && !primariesSet {
			cfg.Primaries, primariesSet = *l.Primaries, true
		}
		if l.Container != nil && !containerSet {
			cfg.Container, containerSet = *l.Container, true
		}
	}
	for _, name := range commandNames {
		var argv []string
		var timeout time.Duration
		for _, l := range layers {
			if l == nil || l.Commands[name] == nil {
				continue
			}
			c := l.Commands[name]
			if argv == nil && c.Argv != nil {
				argv = c.Argv
			}
			if timeout == 0 && len(c.Timeout) > 0 {
				timeout, _ = parseTimeout(c.Timeout) // checked above
			}
		}
		if argv == nil {
			if timeout != 0 {
				return nil, ops.Usagef("replicated configuration: commands.%s has a timeout but no argv in any source", name)
			}
			continue
		}
		if timeout == 0 {
			timeout = DefaultQueryTimeout
			switch name {
			case CmdSeed, CmdPrimary, CmdSecondary:
				timeout = DefaultRoleTimeout
			}
		}
		cfg.Commands[name] = &Command{Argv: slices.Clone(argv), Timeout: timeout}
	}
	return cfg, nil
}

// PrimariesLayer is a layer setting only the number of primaries (a flag
// or DBOPS_PRIMARIES).
func PrimariesLayer(n int32, source string) *Layer {
	return &Layer{Primaries: &n, Source: source}
}
