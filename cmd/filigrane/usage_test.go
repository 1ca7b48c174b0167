package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

// `filigrane` with no command names every benchmark that `filigrane bench` runs, so that a user reading the
// first screen learns of load, chaos and video too.
func TestUsageNamesEveryBenchmark(t *testing.T) {
	var top, bench bytes.Buffer
	if rc := run(context.Background(), nil, &bytes.Buffer{}, &top); rc != 2 {
		t.Fatalf("no command: exit %d", rc)
	}
	if rc := run(context.Background(), []string{"bench", "--help"}, &bench, &bytes.Buffer{}); rc != 0 {
		t.Fatalf("bench --help: exit %d", rc)
	}
	var line string
	for _, l := range strings.Split(top.String(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "bench ") {
			line = l
		}
	}
	names := regexp.MustCompile(`filigrane bench ([a-z]+) `).FindAllStringSubmatch(bench.String(), -1)
	if line == "" || len(names) < 5 {
		t.Fatalf("usage line %q, benchmarks %v", line, names)
	}
	for _, n := range names {
		if !regexp.MustCompile(`\b` + n[1] + `\b`).MatchString(line) {
			t.Errorf("the usage's bench line %q does not name %q", line, n[1])
		}
	}
}
