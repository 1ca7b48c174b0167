package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// serveProcess is `filigrane serve` run as a process of its own (this test binary running main: TestMain),
// as an operator runs it: the tests send it signals and read its log and exit status.
type serveProcess struct {
	cmd    *exec.Cmd
	api    string // host:port of the API listener
	upload string // host:port of the upload host
	key    string // the development owner key the first start printed
	exited chan struct{}
	code   int // exit status, once exited is closed

	mu   sync.Mutex
	logs bytes.Buffer // stderr: the JSON log and anything written outside it
	seen chan struct{}
}

// startServe starts `filigrane serve` on a fresh data directory with the JSON log, on free loopback ports, and
// waits for its "node started" line. The process is killed when the test ends if it still runs.
func startServe(t *testing.T, args ...string) *serveProcess {
	t.Helper()
	return startServeEnv(t, nil, args...)
}

// startServeEnv is startServe with env added to the process's environment.
func startServeEnv(t *testing.T, env []string, args ...string) *serveProcess {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	full := append([]string{"serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--upload-listen", "127.0.0.1:0",
		"--log-format", "json", "--workers", "1"}, args...)
	p := &serveProcess{cmd: exec.Command(exe, full...), exited: make(chan struct{}), seen: make(chan struct{}, 1)}
	p.cmd.Env = append(append(os.Environ(), "FILIGRANE_CODEC_KEY=serve-process-test"), env...)
	var stdout bytes.Buffer
	p.cmd.Stdout = &stdout
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan map[string]any, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.logs.Write(sc.Bytes())
			p.logs.WriteByte('\n')
			p.mu.Unlock()
			select {
			case p.seen <- struct{}{}:
			default:
			}
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["message"] == "node started" {
				started <- line
			}
		}
		err := p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		if st, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			p.code = 128 + int(st.Signal())
		}
		_ = err
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("serve log:\n%s", p.log())
		}
	})
	select {
	case line := <-started:
		p.api, p.upload = line["api"].(string), line["upload"].(string)
	case <-p.exited:
		t.Fatalf("serve exited with %d before it started:\n%s", p.code, p.log())
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not start within a minute:\n%s", p.log())
	}
	// The banner is printed after the "node started" line.
	deadline := time.Now().Add(10 * time.Second)
	for p.key == "" && time.Now().Before(deadline) {
		if m := regexp.MustCompile(`(?m)^\s+(fgk_\S+)$`).FindStringSubmatch(stdout.String()); m != nil {
			p.key = m[1]
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if p.key == "" {
		t.Fatalf("no development key in serve's output:\n%s", stdout.String())
	}
	return p
}

func (p *serveProcess) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// waitLog waits for a log line containing s, up to d.
func (p *serveProcess) waitLog(t *testing.T, s string, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for !strings.Contains(p.log(), s) {
		select {
		case <-p.seen:
		case <-p.exited:
			if strings.Contains(p.log(), s) {
				return
			}
			t.Fatalf("serve exited (%d) without logging %q", p.code, s)
		case <-timeout:
			t.Fatalf("serve did not log %q within %s", s, d)
		}
	}
}

// holdUploadPUT creates an upload and starts its PUT on a raw connection that sends the headers and a few
// of the body, then nothing: a request in flight that a graceful stop waits for. It returns once the node
// holds it: a second PUT of the upload is answered 409 upload_in_use (whichever of the two the node began
// first is the one held).
func holdUploadPUT(t *testing.T, p *serveProcess) {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+p.api+"/uploads",
		strings.NewReader(`{"filename":"held.png","size":1000000,"kind":"image"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", p.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var up struct {
		Upload struct{ URL string } `json:"upload"`
	}
	if resp.StatusCode != 201 || json.Unmarshal(body, &up) != nil {
		t.Fatalf("POST /uploads: %d %s", resp.StatusCode, body)
	}
	u, err := url.Parse(up.Upload.URL)
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan string, 2)
	for range 2 {
		conn, err := net.Dial("tcp", p.upload)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		// 64 KiB of the body: the server reads a first part of a streamed body before it calls the handler.
		fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000000\r\n\r\n", u.RequestURI(), p.upload)
		if _, err := conn.Write(make([]byte, 64<<10)); err != nil {
			t.Fatal(err)
		}
		go func() {
			line, _ := bufio.NewReader(conn).ReadString('\n')
			answered <- line
		}()
	}
	select {
	case line := <-answered:
		if !strings.Contains(line, " 409 ") {
			t.Fatalf("a second PUT of the upload was answered %q, want 409 while the first is held", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("neither PUT was answered in 30 s")
	}
}

// A second SIGTERM while the node waits for a request in flight stops it at once, with a line saying so and
// the exit status of a process ended by that signal; the first only begins the graceful stop, whose grace
// (a minute here) the held request would otherwise use up. Before, the second signal was swallowed.
func TestSecondSignalStopsAtOnce(t *testing.T) {
	t.Parallel()
	p := startServe(t, "--shutdown-grace", "60s")
	holdUploadPUT(t, p)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, "a second SIGINT or SIGTERM stops at once", 10*time.Second)
	select {
	case <-p.exited:
		t.Fatalf("serve exited (%d) after the first SIGTERM with a request in flight and a minute of grace", p.code)
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("serve still runs 10 s after a second SIGTERM")
	}
	if p.code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit status %d, want %d", p.code, 128+int(syscall.SIGTERM))
	}
	if !strings.Contains(p.log(), "second SIGTERM signal: stopping at once") {
		t.Errorf("no line about the second signal in the log:\n%s", p.log())
	}
}

// The first SIGTERM turns /readyz to 503 (reason "draining") at once while the listener stays open for
// --drain-delay, so that a load balancer sees it; a new upload is refused meanwhile with 503 and Retry-After;
// a second SIGTERM ends the delay and the process at once. Before, /readyz stayed 200 and new work was taken
// until the listener closed.
func TestSIGTERMReadinessDuringDrainDelay(t *testing.T) {
	t.Parallel()
	p := startServe(t, "--drain-delay", "50s", "--shutdown-grace", "60s")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, "the listeners close after the drain delay", 10*time.Second)
	resp, err := http.Get("http://" + p.api + "/readyz")
	if err != nil {
		t.Fatalf("/readyz during the drain delay: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), `"shutdown":"draining`) {
		t.Fatalf("/readyz during the drain delay: %d %s; want 503 saying the node is draining", resp.StatusCode, body)
	}
	req, err := http.NewRequest("POST", "http://"+p.api+"/uploads", strings.NewReader(`{"filename":"a.png","size":1000,"kind":"image"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", p.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /uploads during the drain delay: %v", err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"code":"service_unavailable"`) {
		t.Fatalf("POST /uploads during the drain delay: %d %s; want 503 service_unavailable with Retry-After", resp.StatusCode, body)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("serve still runs 10 s after a second SIGTERM during the drain delay")
	}
	if p.code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit status %d, want %d", p.code, 128+int(syscall.SIGTERM))
	}
}

// A --drain-delay as long as the shutdown grace it is part of is refused (exit 2); the default delay gives way
// to a short grace instead (half of it).
func TestDrainDelayWithinTheGrace(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--upload-listen", "127.0.0.1:0",
		"--drain-delay", "30s", "--shutdown-grace", "30s"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "--drain-delay 30s: want less than --shutdown-grace") {
		t.Fatalf("--drain-delay 30s --shutdown-grace 30s: exit %d: %s", code, errb.String())
	}
}

// A negative shutdown grace, job lease or sweep interval stops serve with the flag's name (exit 2) before the
// node starts. Before, each was taken without a word: the grace cut every request in flight at the first
// signal, the lease became the default, and the sweeper stopped.
func TestServeRefusesNegativeDurations(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"--shutdown-grace", "--job-lease", "--sweep-interval"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var out, errb bytes.Buffer
		code := run(ctx, []string{"serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--upload-listen", "127.0.0.1:0",
			flag, "-5s"}, &out, &errb)
		cancel()
		if code != 2 || !strings.Contains(errb.String(), flag+" -5s: want a duration") {
			t.Errorf("%s -5s: exit %d: %s", flag, code, errb.String())
		}
	}
}

// A --data naming a directory that holds other files and no store (an operator's typo: their home directory)
// stops serve and admin with one line naming it and exit status 1, and nothing is written there. Before, a
// store/ and a blobs/ were created among the files.
func TestDataDirWithOtherFilesRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"serve", "--data", dir, "--listen", "127.0.0.1:0", "--upload-listen", "127.0.0.1:0", "--log-format", "json"},
		{"admin", "--data", dir, "org", "list"},
	} {
		// Bounded: a serve that took the directory would run until its context ends.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var out, errb bytes.Buffer
		code := run(ctx, args, &out, &errb)
		cancel()
		stderr := errb.String()
		// serve's line is in its JSON log (quotes escaped), after the development codec key's warning.
		if code != 1 || !strings.Contains(stderr, dir+" is not empty (") || !strings.Contains(stderr, "notes.txt") ||
			!strings.Contains(stderr, "holds no Filigrane store") {
			t.Errorf("%s on a directory of other files: exit %d: %s", args[0], code, stderr)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("the directory now holds %v (%v), want notes.txt alone", entries, err)
	}
}

// A malformed flag is answered with the line naming it and a pointer to `serve -h` (exit 2), not the whole list
// of flags after it; `serve -h` prints the list on stdout (exit 0).
func TestServeBadFlagIsOneLine(t *testing.T) {
	t.Parallel()
	code, _, stderr := runCLI(t, "serve", "--workers", "abc")
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code != 2 || len(lines) != 2 || !strings.Contains(lines[0], "-workers") || !strings.Contains(lines[1], "serve -h") {
		t.Fatalf("serve --workers abc: exit %d, %d lines: %s", code, len(lines), stderr)
	}
	code, stdout, _ := runCLI(t, "serve", "-h")
	if code != 0 || !strings.Contains(stdout, "-min-free-disk") {
		t.Fatalf("serve -h: exit %d: %s", code, stdout)
	}
}

// A full temporary directory (where a video's probe copies the file for ffprobe) is answered 503 with
// Retry-After: 30 and a detail naming the disk, and the same request is taken once space is freed. Before,
// the answer was 503 "stored file unavailable" without Retry-After. The directory is a 1 MiB tmpfs: mounting
// needs root, elsewhere the test is skipped, saying so.
func TestFullTempDirAnswersLowDisk(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg is not installed (scripts/setup.sh)")
	}
	clip := filepath.Join(t.TempDir(), "clip.mp4")
	if out, err := exec.Command("ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=512x384:rate=10", "-t", "1",
		"-pix_fmt", "yuv420p", "-c:v", "libx264", "-preset", "ultrafast", clip).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, out)
	}
	tmp := t.TempDir()
	if err := syscall.Mount("tmpfs", tmp, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(tmp, syscall.MNT_DETACH) })
	filler := filepath.Join(tmp, "filler")
	if err := os.WriteFile(filler, make([]byte, 2<<20), 0o600); err == nil || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the tmpfs: %v, want ENOSPC", err)
	}
	p := startServeEnv(t, []string{"TMPDIR=" + tmp})
	send := func() (int, string, string) {
		t.Helper()
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		fw, _ := mw.CreateFormFile("file", "clip.mp4")
		b, err := os.ReadFile(clip)
		if err != nil {
			t.Fatal(err)
		}
		fw.Write(b)
		mw.WriteField("data", `{"o":1}`)
		mw.Close()
		req, _ := http.NewRequest("POST", "http://"+p.api+"/watermarks/videos", &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("X-API-Key", p.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(out)
	}
	if code, retry, body := send(); code != 503 || retry != "30" || !strings.Contains(body, "low on disk space") {
		t.Fatalf("video with a full temporary directory: %d Retry-After %q %s", code, retry, body)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if code, _, body := send(); code != 200 {
		t.Fatalf("video once space is freed: %d %.300s", code, body)
	}
}
