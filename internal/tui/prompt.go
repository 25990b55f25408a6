package tui

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/term"
)

// IsTerminal reports whether f (usually os.Stdin or os.Stdout) is a
// terminal. Anything without a file descriptor is not.
func IsTerminal(f any) bool {
	fd, ok := f.(interface{ Fd() uintptr })
	if !ok {
		return false
	}
	return term.IsTerminal(int(fd.Fd()))
}

// maxPromptLine bounds an answer so a stream of garbage on stdin cannot
// grow memory without limit.
const maxPromptLine = 4096

// Confirm asks a y/N question on out and reads the answer from in. Only
// "y" or "yes" (any case) confirm; an empty answer or end of input means
// no, which is the safe default for destructive operations. Other answers
// ask again.
func Confirm(in io.Reader, out io.Writer, question string) (bool, error) {
	for {
		if _, err := fmt.Fprintf(out, "%s [y/N]: ", question); err != nil {
			return false, err
		}
		line, err := readLine(in)
		if err != nil && !errors.Is(err, io.EOF) {
			return false, err
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
			return true, nil
		case "n", "no", "":
			if errors.Is(err, io.EOF) {
				// Keep the shell prompt off the question's line.
				fmt.Fprintln(out)
			}
			return false, nil
		}
		if errors.Is(err, io.EOF) {
			fmt.Fprintln(out)
			return false, nil
		}
		if _, err := fmt.Fprintln(out, `please answer "y" or "n"`); err != nil {
			return false, err
		}
	}
}

// readLine reads up to a newline one byte at a time: a buffered reader
// would swallow input meant for whatever reads the terminal next.
func readLine(in io.Reader) (string, error) {
	var b strings.Builder
	var buf [1]byte
	for {
		n, err := in.Read(buf[:])
		if n == 1 {
			if buf[0] == '\n' {
				return b.String(), nil
			}
			if b.Len() >= maxPromptLine {
				return b.String(), errors.New("answer too long")
			}
			b.WriteByte(buf[0])
		}
		if err != nil {
			return b.String(), err
		}
	}
}
