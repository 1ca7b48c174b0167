package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// `--data DIR` after the command, as people type it (`filigrane admin org create --name Acme --data DIR`),
// works like before it: the organization lands in DIR and is listed from there, and ./data is not touched.
func TestAdminDataFlagAfterCommand(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("FILIGRANE_DATA", "")
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"admin", "org", "create", "--name", "Acme", "--plan", "growth", "--data", dir}, &out, &errb); code != 0 {
		t.Fatalf("org create: exit %d: %s", code, errb.String())
	}
	for _, args := range [][]string{
		{"admin", "org", "list", "--data", dir},
		{"admin", "org", "list", "--data=" + dir},
		{"admin", "--data", dir, "org", "list"},
	} {
		out.Reset()
		errb.Reset()
		if code := run(context.Background(), args, &out, &errb); code != 0 || !strings.Contains(out.String(), "Acme") {
			t.Fatalf("%v: exit %d: %s%s", args, code, out.String(), errb.String())
		}
	}
	if _, err := os.Stat("data"); !os.IsNotExist(err) {
		t.Fatalf("admin created ./data: %v", err)
	}
}
