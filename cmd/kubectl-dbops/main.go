// Command kubectl-dbops is a kubectl plugin (kubectl dbops ...) that runs
// database operators' careful procedures by hand.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dbops/kubectl-dbops/internal/commands"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

func main() {
	// The first SIGINT/SIGTERM cancels the context: the running step
	// finishes or is safely abandoned and the journal is kept (exit 130).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A reader that goes away (`... | head -1`) must not kill the process in the middle of a
	// step: with SIGPIPE ignored a write returns EPIPE, the operation finishes, the lock is
	// released, and the failed write is reported at the end (exit 1, "writing output").
	signal.Ignore(syscall.SIGPIPE)
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	err := commands.NewRootCmd(streams).ExecuteContext(ctx)
	if err != nil {
		// "": the operation's view showed the error already.
		if line := commands.ErrorLine(err); line != "" {
			fmt.Fprintln(os.Stderr, line)
		}
	}
	stop()
	os.Exit(ops.ExitCode(err))
}
