// Command pause is the sandbox container of the test node's pods (tools/start-kubernetes).
//
// Kubernetes' own pause image comes from a registry, which these machines cannot reach, so
// this one is built beside the node's binaries and imported into its containerd. It does what
// that pause does: hold the pod's namespaces while sleeping, reap orphaned children (it is
// PID 1 of a pod that shares its PID namespace) and exit at once on SIGINT or SIGTERM.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
