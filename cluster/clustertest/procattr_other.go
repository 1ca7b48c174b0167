//go:build !linux

package clustertest

import "os/exec"

// dieWithParent is Linux-only; elsewhere KillAll (or the process watching
// its stdin) has to clean up.
func dieWithParent(*exec.Cmd) {}
