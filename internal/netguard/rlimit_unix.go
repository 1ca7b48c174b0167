//go:build unix

package netguard

import (
	"fmt"
	"syscall"
)

// RaiseFileLimit raises the process's soft limit on open files to its hard limit, so that the connection
// limits, not the default soft limit (often 1024), decide when clients are refused. It returns the soft
// limit in force afterwards. Go's runtime already does this on Linux since 1.19; doing it here as well
// keeps the guarantee explicit (and the value for fitting the connection limits) whatever the runtime does.
func RaiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("read the open-file limit: %w", err)
	}
	if lim.Cur >= lim.Max {
		return uint64(lim.Cur), nil
	}
	want := lim
	want.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		return uint64(lim.Cur), fmt.Errorf("raise the open-file limit from %d to %d: %w", lim.Cur, lim.Max, err)
	}
	return uint64(want.Cur), nil
}
