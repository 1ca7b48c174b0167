package main

import (
	"context"
	"fmt"
	"io"
)

// runBenchAPI is the API load benchmark. Placeholder until the server work lands; its owner replaces this file.
func runBenchAPI(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "filigrane bench api: not implemented yet")
	return 1
}
