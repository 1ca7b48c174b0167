//go:build !unix

package imageio

import (
	"testing"
	"time"
)

// reportCPU reports nothing where rusage is unavailable; the wall time of ns/op remains.
func reportCPU(b *testing.B, before time.Duration) {}

func cpuTime() time.Duration { return 0 }
