package commands

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// VersionInfo is the `version -o json|yaml` schema.
type VersionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
	// Dirty: built from a work tree with uncommitted changes (known only
	// from the Go build information, see versionInfo).
	Dirty bool `json:"dirty,omitempty"`
}

// versionInfo returns the linker-set build information (Makefile,
// .goreleaser.yaml). Built without those flags (go install, go build), it
// falls back to what the Go toolchain records in the binary: the module
// version, and the VCS revision, time and modified flag.
func versionInfo(read func() (*debug.BuildInfo, bool)) VersionInfo {
	info := VersionInfo{Version: Version, Commit: Commit, Date: Date,
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := read()
	if !ok || bi == nil {
		return info
	}
	if info.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if info.Commit == "none" {
				info.Commit = s.Value
			}
		case "vcs.time":
			if info.Date == "unknown" {
				info.Date = s.Value
			}
		case "vcs.modified":
			info.Dirty = s.Value == "true"
		}
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	return info
}

// VersionOptions holds `version` flags.
type VersionOptions struct {
	*GlobalOptions
	// RunFlags are the shared run flags, checked as every command checks them.
	RunFlags *RunFlags
	// Info is the build information to print (Complete).
	Info VersionInfo
	// readBuildInfo reads the Go build information (debug.ReadBuildInfo).
	readBuildInfo func() (*debug.BuildInfo, bool)
}

// NewVersionOptions returns options bound to the shared flags.
func NewVersionOptions(g *GlobalOptions, rf *RunFlags) *VersionOptions {
	return &VersionOptions{GlobalOptions: g, RunFlags: rf, readBuildInfo: debug.ReadBuildInfo}
}

// NewVersionCmd prints build information.
func NewVersionCmd(g *GlobalOptions, rf *RunFlags) *cobra.Command {
	o := NewVersionOptions(g, rf)
	return &cobra.Command{
		Use:         "version",
		Short:       "Print the kubectl-dbops version",
		Example:     "  kubectl dbops version\n  kubectl dbops version -o json",
		Annotations: documentAnnotations(),
		Args:        noArgs,
		RunE:        runOptions(o),
	}
}

// Complete gathers the build information.
func (o *VersionOptions) Complete(_ *cobra.Command, _ []string) error {
	o.Info = versionInfo(o.readBuildInfo)
	return nil
}

// Validate checks the shared flags (-o) without touching the API.
func (o *VersionOptions) Validate() error {
	if err := o.GlobalOptions.Validate(); err != nil {
		return err
	}
	return o.RunFlags.Validate()
}

// Run prints the build information.
func (o *VersionOptions) Run(_ *cobra.Command) error {
	info := o.Info
	doc, err := document(info, "Version", "", "")
	if err != nil {
		return err
	}
	return o.printDocument(o.Out, doc, func(w io.Writer) error {
		dirty := ""
		if info.Dirty {
			dirty = ", modified"
		}
		_, err := fmt.Fprintf(w, "kubectl-dbops %s (commit %s%s, built %s, %s, %s)\n",
			info.Version, info.Commit, dirty, info.Date, info.GoVersion, info.Platform)
		return err
	})
}
