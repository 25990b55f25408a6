package replicated

import (
	"encoding/json"
	"strconv"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Environment variables of the replicated engine's configuration. They sit
// between flags and the config file.
const (
	// EnvConfig holds a replicated configuration document (JSON or YAML, the
	// schema of the config file's "replicated" section).
	EnvConfig = "DBOPS_REPLICATED_CONFIG"
	// EnvPrimaries is the number of primaries.
	EnvPrimaries = "DBOPS_PRIMARIES"
)

// ConfigKey is the config file section of the replicated engine:
//
//	replicated:
//	  primaries: 2                 # default 1
//	  container: db                # optional; exec container
//	  commands:                    # sequence and primary are required
//	    sequence:  {argv: [/scripts/seq], timeout: 30s}
//	    seed:      {argv: [/scripts/seed]}
//	    primary:   {argv: [/scripts/primary], timeout: 5m}
//	    secondary: {argv: [/scripts/secondary]}
//	    stop:      {argv: [/scripts/stop], timeout: 60}
//	    status:    {argv: [/scripts/status]}
const ConfigKey = "replicated"

// ConfigLayers reads the configuration sources above the StatefulSet annotation, highest
// precedence first: environment (getenv), then the config file's ConfigKey section
// (fromFile: its value as the file parser read it, and whether it is set). Flags
// (--primaries) are applied by the commands through their requests.
func ConfigLayers(getenv func(string) string, fromFile func() (any, bool)) ([]*Layer, error) {
	var layers []*Layer
	if v := getenv(EnvPrimaries); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return nil, ops.Usagef("%s must be a whole number of at least 0, got %q", EnvPrimaries, v)
		}
		layers = append(layers, PrimariesLayer(int32(n), EnvPrimaries))
	}
	if v := getenv(EnvConfig); v != "" {
		l, err := ParseLayer([]byte(v), EnvConfig)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	if section, ok := fromFile(); ok {
		// Re-encode what the file parser read so the file gets the same strict
		// checks as the other sources.
		b, err := json.Marshal(section)
		if err != nil {
			return nil, ops.Usagef("config file section %s: %v", ConfigKey, err)
		}
		l, err := ParseLayer(b, "the config file (section "+ConfigKey+")")
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	return layers, nil
}
