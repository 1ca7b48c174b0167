//go:build unix

package apibench

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) this process used so far; 0 where the platform does not say.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
