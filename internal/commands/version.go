package commands

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// VersionInfo is the `version -o json|yaml` schema.
type VersionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// NewVersionCmd prints build information.
func NewVersionCmd(g *GlobalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the kubectl-dbops version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.Validate(); err != nil {
				return err
			}
			info := VersionInfo{Version: Version, Commit: Commit, Date: Date,
				GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			if g.Output != "text" {
				return writeStructured(g.Out, info, g.Output)
			}
			_, err := fmt.Fprintf(g.Out, "kubectl-dbops %s (commit %s, built %s, %s, %s)\n",
				info.Version, info.Commit, info.Date, info.GoVersion, info.Platform)
			return err
		},
	}
}
