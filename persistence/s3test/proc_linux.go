package s3test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// dieWithParent makes the kernel kill the server when the test process dies without its cleanups (a panic in
// another test, a timeout kill): a suite once left a versitygw running for hours over a removed directory
// after a test's panic ended its package's process.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// stopped reports whether every thread of process pid is stopped. kill(SIGSTOP) returns before the threads
// running on other CPUs have stopped, and one of them could still answer a request.
func stopped(pid int) bool {
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", task.Name(), "stat"))
		if err != nil {
			return false
		}
		// The state follows the command name in parentheses, which may itself hold spaces or parentheses.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 || i+2 >= len(stat) || (stat[i+2] != 'T' && stat[i+2] != 't') {
			return false
		}
	}
	return true
}
