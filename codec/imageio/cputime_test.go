//go:build unix

package imageio

import (
	"syscall"
	"testing"
	"time"
)

// reportCPU adds the benchmark's CPU time per operation (user+system of the whole process, from rusage) as
// "cpu-ms/op": on a loaded machine the wall time of ns/op counts the other processes too, the CPU time does
// not. Call it after b.Loop with the rusage taken before.
func reportCPU(b *testing.B, before time.Duration) {
	b.ReportMetric(float64(cpuTime()-before)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
