package commands

import (
	"encoding/json"
	"strconv"

	"github.com/kubectl-dbops/kubectl-dbops/internal/engines/replicated"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// Environment variables of the replicated engine's configuration. They sit
// between flags and the config file.
const (
	// EnvReplicatedConfig holds a replicated configuration document (JSON
	// or YAML, the schema of the config file's "replicated" section).
	EnvReplicatedConfig = "DBOPS_REPLICATED_CONFIG"
	// EnvPrimaries is the number of primaries.
	EnvPrimaries = "DBOPS_PRIMARIES"
)

// configKeyReplicated is the config file section of the replicated engine:
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
const configKeyReplicated = "replicated"

// replicatedLayers reads the configuration sources above the StatefulSet
// annotation, highest precedence first: environment, then config file.
// Flags (--primaries) are applied by the commands through their requests.
func (g *GlobalOptions) replicatedLayers() ([]*replicated.Layer, error) {
	var layers []*replicated.Layer
	if v := g.Getenv(EnvPrimaries); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return nil, ops.Usagef("%s must be a whole number of at least 0, got %q", EnvPrimaries, v)
		}
		layers = append(layers, replicated.PrimariesLayer(int32(n), EnvPrimaries))
	}
	if v := g.Getenv(EnvReplicatedConfig); v != "" {
		l, err := replicated.ParseLayer([]byte(v), EnvReplicatedConfig)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	if g.viper.IsSet(configKeyReplicated) {
		// Re-encode what viper read so the file gets the same strict
		// checks as the other sources.
		b, err := json.Marshal(g.viper.Get(configKeyReplicated))
		if err != nil {
			return nil, ops.Usagef("config file section %s: %v", configKeyReplicated, err)
		}
		l, err := replicated.ParseLayer(b, "the config file (section "+configKeyReplicated+")")
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	return layers, nil
}
