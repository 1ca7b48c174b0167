//go:build !linux

package s3test

import "os/exec"

// stopped cannot look at thread states here; Pause then returns as soon as the signal is sent.
func stopped(int) bool { return true }

// dieWithParent has no portable equivalent: the server outlives a test process that dies without its cleanups.
func dieWithParent(*exec.Cmd) {}
