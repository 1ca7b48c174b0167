package main

import (
	"context"
	"fmt"
	"io"
)

func runCodec(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "filigrane codec: not implemented yet")
	return 1
}
