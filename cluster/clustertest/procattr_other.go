//go:build !linux

package clustertest

import "os/exec"

// dieWithParent is Linux-only; elsewhere KillAll (or the process watching
// its stdin) has to clean up.
func dieWithParent(*exec.Cmd) {}

// listensOn cannot tell without Linux's /proc: no check.
func listensOn(pid, port int) (listening, ok bool) { return false, false }

// reservePort needs flock(2): no reservation elsewhere (FreePorts picks as before).
func reservePort(int) bool { return true }
