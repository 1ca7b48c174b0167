package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"filigrane/cluster"
)

// TestParseRoles: --roles reads a comma-separated list of known roles (empty: the node's default); an
// unknown role stops serve with exit status 2 and names the roles it accepts.
func TestParseRoles(t *testing.T) {
	got, err := parseRoles(" api, cpu-long ,gpu")
	if err != nil || !slices.Equal(got, []cluster.Role{cluster.RoleAPI, cluster.RoleCPULong, cluster.RoleGPU}) {
		t.Fatalf("parseRoles = %v, %v", got, err)
	}
	if got, err := parseRoles(""); err != nil || got != nil {
		t.Fatalf("empty: %v, %v", got, err)
	}
	var stderr bytes.Buffer
	if rc := runServe(context.Background(), []string{"--roles", "api,worker,cook", "--data", t.TempDir()}, &bytes.Buffer{}, &stderr); rc != 2 ||
		!strings.Contains(stderr.String(), `unknown role "cook"`) || !strings.Contains(stderr.String(), "cpu-long") {
		t.Fatalf("exit %d: %s", rc, stderr.String())
	}
	t.Setenv("FILIGRANE_DRAIN_TIMEOUT", "soon")
	if err := checkLimitEnv(); err == nil {
		t.Fatal("a malformed FILIGRANE_DRAIN_TIMEOUT was accepted")
	}
}
