//go:build !unix

package apibench

import "time"

// processCPU is unknown here: the baseline reports no CPU times.
func processCPU() time.Duration { return 0 }
