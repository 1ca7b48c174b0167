//go:build linux

package clustertest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// dieWithParent makes the kernel kill the process when the test process
// dies (a panic, a timeout kill), so no node outlives its test holding
// ports.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// listensOn reports whether process pid holds a TCP socket listening on 127.0.0.1 (or any address) at port:
// a readiness probe that only dialled the port could be answered by another test's process that took the port
// between FreePorts' pick and this process's bind. ok is false when neither the kernel's socket diagnostics nor
// /proc can tell (no check then).
func listensOn(pid, port int) (listening, ok bool) {
	inodes, err := listenerInodes(port)
	if err == nil {
		ok = true
	} else {
		inodes = procListenerInodes(port)
		ok = inodes != nil
	}
	if !ok {
		return false, false
	}
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return false, true // the process is gone
	}
	for _, fd := range fds {
		if target, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name()); err == nil && inodes[target] {
			return true, true
		}
	}
	return false, true
}

// procListenerInodes is listenerInodes read from /proc/net/tcp and tcp6, for a system without socket
// diagnostics; nil when neither table can be read.
func procListenerInodes(port int) map[string]bool {
	var inodes map[string]bool
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		if inodes == nil {
			inodes = map[string]bool{}
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, found := strings.Cut(f[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); !found || err != nil || int(p) != port {
				continue
			}
			inodes["socket:["+f[9]+"]"] = true
		}
	}
	return inodes
}

// portLocks holds, for the life of the test process, a lock on a file named after each port FreePorts gave
// out: a restarted node binds its ports again, and in the moment between its exit and its restart's bind a
// FreePorts pick elsewhere (another test of this process or another test binary of the suite) could take one
// of them (bench chaos's frozen node restarted onto "address already in use", found by a warm suite run). The
// locks are flock(2) locks, which conflict between separate opens even within one process.
// portLockRoot holds the port reservations' directory: the machine's /tmp, whatever TMPDIR says.
const portLockRoot = "/tmp"

var portLocks struct {
	sync.Mutex
	files []*os.File
}

// reservePort locks port's file in the shared directory for the rest of this process's life, and reports
// false if another FreePorts holds it. When the directory or file cannot be made there is no reservation
// (true: the pick goes ahead as before).
func reservePort(port int) bool {
	// Not under os.TempDir(): scripts/test.sh gives each suite a TMPDIR of its own, and the reservations must be
	// seen by every test process on the machine (two suites, or a suite and a package's go test, side by side).
	dir := filepath.Join(portLockRoot, "filigrane-clustertest-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDONLY, 0o666)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return !errors.Is(err, syscall.EWOULDBLOCK)
	}
	portLocks.Lock()
	portLocks.files = append(portLocks.files, f) // kept open: closing the file would release the lock
	portLocks.Unlock()
	return true
}
