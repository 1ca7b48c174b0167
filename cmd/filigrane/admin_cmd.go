package main

import (
	"context"
	"fmt"
	"io"
)

func runAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "filigrane admin: not implemented yet")
	return 1
}
