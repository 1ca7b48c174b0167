package node_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeBlock returns the shell block that follows marker in README.md.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), marker)
	if !ok {
		t.Fatalf("README.md has no %q", marker)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	if !ok {
		t.Fatalf("no shell block after %q", marker)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("unterminated shell block after %q", marker)
	}
	return block
}

// shownOutput is the output a README block shows in its comments: the comment lines that start like an
// answer (a JSON object, or "codec,type" as ffprobe prints), without the explanation after three spaces, as
// patterns in which "..." stands for anything.
func shownOutput(block string) []*regexp.Regexp {
	answer := regexp.MustCompile(`^# (\{.*|[a-z0-9_]+,[a-z]+.*)$`)
	var out []*regexp.Regexp
	for _, line := range strings.Split(block, "\n") {
		m := answer.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		shown, _, _ := strings.Cut(m[1], "   ")
		pat := strings.ReplaceAll(regexp.QuoteMeta(strings.TrimSpace(shown)), `\.\.\.`, `.*`)
		out = append(out, regexp.MustCompile("^"+pat+"$"))
	}
	return out
}

// TestREADMEMediaRoundTrip runs the README's PDF and video block with bash, curl, jq, mutool and ffmpeg
// against a node, as a reader would paste it: every output the block shows in its comments must appear, in
// order, and the ids found are the SHA-256 of the data objects sent.
func TestREADMEMediaRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "jq", "mutool", "ffmpeg", "ffprobe"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (scripts/setup.sh installs it)", tool)
		}
	}
	block := readmeBlock(t, "<!-- run by TestREADMEMediaRoundTrip")
	shown := shownOutput(block)
	if len(shown) < 5 {
		t.Fatalf("the block shows %d outputs; the test expects the PDF detection, its record, the streams, the video record and its detection", len(shown))
	}
	f := newFixture(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+block)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "API="+f.base, "KEY="+f.dev.Secret)
	cmd.WaitDelay = 5 * time.Second // the polling loop's sleep must not hold the pipes open
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README block failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	sc := bufio.NewScanner(&stdout)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	i := 0
	for _, want := range shown {
		for i < len(lines) && !want.MatchString(lines[i]) {
			i++
		}
		if i == len(lines) {
			t.Fatalf("the README shows an output matching %s; the block printed:\n%s", want, strings.Join(lines, "\n"))
		}
		i++
	}

	id := func(data string) string { s := sha256.Sum256([]byte(data)); return hex.EncodeToString(s[:]) }
	out := strings.Join(lines, "\n")
	for _, want := range []string{
		`{"watermarked":true,"confidence":1,"watermark_id":"` + id(`{"contract":"c-17"}`) + `"`,
		`{"watermarked":true,"watermark_id":"` + id(`{"film":"f-3"}`) + `"}`,
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("the block's output lacks %s:\n%s", want, out)
		}
	}
	if marked, err := os.ReadFile(dir + "/report-marked.pdf"); err != nil || !bytes.HasPrefix(marked, []byte("%PDF-")) {
		t.Fatalf("report-marked.pdf: %v %.40q", err, marked)
	}
}
