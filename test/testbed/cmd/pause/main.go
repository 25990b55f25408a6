// Command pause is the sandbox ("pause") container of the test bed's real nodes: it holds the
// pod's namespaces, reaps zombies (it is PID 1 of the pod when the PID namespace is shared) and
// exits 0 on SIGTERM or SIGINT, as the kubelet expects when it stops a pod sandbox.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
