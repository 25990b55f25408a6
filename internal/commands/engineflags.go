package commands

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// EngineFlags are an engine's own flags: it binds them for each verb that reads them, and
// checks their values without the API.
type EngineFlags interface {
	// AddFlags binds the flags verb reads ("bootstrap", "restart", ...; "": the flags
	// every command takes, bound on the root) to fs; none for a verb the engine ignores.
	AddFlags(verb string, fs *pflag.FlagSet)
	// Validate checks the values (given reports the flags set on the command line), for
	// every command, whatever cluster it is for: bad input is refused before anything runs.
	Validate(given func(name string) bool) error
}

// annotationEngine marks a flag only some engines read: the engines' names. Help shows
// such flags in a section per engine (engineUsage).
const annotationEngine = "dbops.io/engine"

// engineFlagsOf returns the flags of engine name, made on first use; nil for an engine
// without (or not in the registry).
func (g *GlobalOptions) engineFlagsOf(name string) EngineFlags {
	if f, ok := g.engineFlags[name]; ok {
		return f
	}
	for _, k := range g.Engines {
		if k.Name == name && k.NewFlags != nil {
			if g.engineFlags == nil {
				g.engineFlags = map[string]EngineFlags{}
			}
			g.engineFlags[name] = k.NewFlags()
			return g.engineFlags[name]
		}
	}
	return nil
}

// addEngineFlags binds to fs the flags every engine reads for verb, and marks them as that
// engine's.
func (g *GlobalOptions) addEngineFlags(verb string, fs *pflag.FlagSet) {
	for _, k := range g.Engines {
		ef := g.engineFlagsOf(k.Name)
		if ef == nil {
			continue
		}
		own := pflag.NewFlagSet(k.Name, pflag.ContinueOnError)
		own.SortFlags = false
		ef.AddFlags(verb, own)
		own.VisitAll(func(f *pflag.Flag) {
			if fs.Lookup(f.Name) != nil {
				return // another engine bound it for this verb already: claimed by both
			}
			fs.AddFlag(f)
		})
		own.VisitAll(func(f *pflag.Flag) { claimFlag(k.Name, fs.Lookup(f.Name)) })
	}
}

// claimFlag marks flag f as one engine reads.
func claimFlag(engine string, f *pflag.Flag) {
	if f == nil {
		return
	}
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	if !slices.Contains(f.Annotations[annotationEngine], engine) {
		f.Annotations[annotationEngine] = append(f.Annotations[annotationEngine], engine)
	}
}

// claimCommandFlags marks the flags commands bind themselves for one engine
// (EngineKind.Flags) across the command tree under root.
func (g *GlobalOptions) claimCommandFlags(root *cobra.Command) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, k := range g.Engines {
			for _, name := range k.Flags {
				claimFlag(k.Name, c.LocalFlags().Lookup(name))
				claimFlag(k.Name, c.PersistentFlags().Lookup(name))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// engineClaims are the engines each engine flag of cmd is for, by flag name: the same name
// may be an engine's on one command and a shared flag on another (bootstrap's --user is
// CrateDB's, the kubeconfig's --user everywhere else).
func engineClaims(cmd *cobra.Command) map[string][]string {
	out := map[string][]string{}
	visit := func(f *pflag.Flag) {
		if engines := f.Annotations[annotationEngine]; len(engines) > 0 {
			out[f.Name] = engines
		}
	}
	cmd.LocalFlags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	return out
}

// validateEngineFlags checks every engine's flags without the API.
func (g *GlobalOptions) validateEngineFlags() error {
	for _, k := range g.Engines {
		if ef := g.engineFlagsOf(k.Name); ef != nil {
			if err := ef.Validate(g.flagGiven); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkEngineFlags refuses a flag of one engine given for a cluster of another (the engine
// would ignore it): one check over the engine flags of the command run (engineClaims), in
// registry order.
func (o *GlobalOptions) checkEngineFlags(c *ops.Cluster) error {
	names := slices.Sorted(maps.Keys(o.flagEngines))
	for _, k := range o.Engines {
		for _, f := range names {
			engines := o.flagEngines[f]
			if !o.flagGiven(f) || !slices.Contains(engines, k.Name) || slices.Contains(engines, c.Engine) {
				continue
			}
			return ops.Usagef("--%s is for %s clusters; cluster %s is %s", f, strings.Join(o.engineTitles(engines), " and "), c.Name, c.Engine)
		}
	}
	return nil
}

// engineUsage is the usage of a command that takes engine flags: cobra's, except that each
// engine's flags (its own and global ones like --fdb-timeout) are a section of their own
// ("CrateDB flags:") between the command's flags and the global ones. Commands without
// engine flags, and those with subcommands, get cobra's (def).
func (g *GlobalOptions) engineUsage(def func(*cobra.Command) error) func(*cobra.Command) error {
	return func(c *cobra.Command) error {
		hasEngine := false
		c.LocalFlags().VisitAll(func(f *pflag.Flag) { hasEngine = hasEngine || (!f.Hidden && len(f.Annotations[annotationEngine]) > 0) })
		if !hasEngine || c.HasAvailableSubCommands() || !c.HasParent() {
			return def(c)
		}
		local, global := pflag.NewFlagSet("local", pflag.ContinueOnError), pflag.NewFlagSet("global", pflag.ContinueOnError)
		groups := map[string]*pflag.FlagSet{}
		add := func(dst *pflag.FlagSet) func(*pflag.Flag) {
			return func(f *pflag.Flag) {
				if f.Hidden {
					return
				}
				if engines := f.Annotations[annotationEngine]; len(engines) > 0 {
					key := strings.Join(g.engineTitles(engines), " and ")
					if groups[key] == nil {
						groups[key] = pflag.NewFlagSet(key, pflag.ContinueOnError)
					}
					groups[key].AddFlag(f)
					return
				}
				dst.AddFlag(f)
			}
		}
		c.LocalFlags().VisitAll(add(local))
		c.InheritedFlags().VisitAll(add(global))
		var b strings.Builder
		b.WriteString("Usage:\n  " + c.UseLine())
		if len(c.Aliases) > 0 {
			b.WriteString("\n\nAliases:\n  " + c.NameAndAliases())
		}
		if c.HasExample() {
			b.WriteString("\n\nExamples:\n" + c.Example)
		}
		section := func(title string, fs *pflag.FlagSet) {
			if fs.HasFlags() {
				b.WriteString("\n\n" + title + ":\n" + strings.TrimRightFunc(fs.FlagUsages(), unicode.IsSpace))
			}
		}
		section("Flags", local)
		for _, key := range g.groupOrder(groups) {
			section(key+" flags", groups[key])
		}
		section("Global Flags", global)
		b.WriteString("\n")
		_, err := c.OutOrStderr().Write([]byte(b.String()))
		return err
	}
}

// engineTitles are the display names of the engines named.
func (g *GlobalOptions) engineTitles(names []string) []string {
	var out []string
	for _, k := range g.Engines {
		if slices.Contains(names, k.Name) {
			out = append(out, cmp.Or(k.Title, k.Name))
		}
	}
	return out
}

// groupOrder is the help order of the engine sections: the registry's.
func (g *GlobalOptions) groupOrder(groups map[string]*pflag.FlagSet) []string {
	var out []string
	keys := slices.Sorted(maps.Keys(groups))
	for _, k := range g.Engines {
		for _, key := range keys {
			if strings.HasPrefix(key, cmp.Or(k.Title, k.Name)) && !slices.Contains(out, key) {
				out = append(out, key)
			}
		}
	}
	for _, key := range keys {
		if !slices.Contains(out, key) {
			out = append(out, key)
		}
	}
	return out
}
