//go:build linux

package clustertest

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the process when the test process
// dies (a panic, a timeout kill), so no node outlives its test holding
// ports.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
