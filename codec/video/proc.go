package video

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one ffmpeg or ffprobe child. It runs in its own process group, which is killed as a whole when the
// context ends; its address space is limited with prlimit when that tool exists; its stderr is kept (the tail)
// for the failure reason.
type proc struct {
	stage  string
	redact []string // file paths shown by name only in the failure reason
	cmd    *exec.Cmd
	stderr *tailBuffer
}

// newProc prepares bin with args. The caller sets Stdin/Stdout before start.
func (t tools) newProc(ctx context.Context, stage, bin string, args ...string) *proc {
	name, argv := bin, args
	if lim := t.limits.MemoryBytes; t.prlimit != "" && lim > 0 {
		// prlimit sets the limit on itself and execs the tool, so the pid (and the process group) stay the same.
		argv = append([]string{"--as=" + strconv.FormatUint(lim, 10), "--", bin}, args...)
		name = t.prlimit
	}
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error {
		// The whole group: ffmpeg's threads live in the process, but a wrapper or helper would not.
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			// It ended on its own just before: Wait reports how. Any other answer would make Wait return
			// "exec: canceling Cmd: no such process" for a stage that succeeded, which the pipeline took for
			// that stage failing, in place of the stage that did (a decoder that had finished was blamed for
			// the muxer refusing a stream, and the error was not even the tool's own).
			return os.ErrProcessDone
		}
		return err
	}
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"} // no proxy or library variables from the service
	p := &proc{stage: stage, cmd: cmd, stderr: &tailBuffer{max: 8 << 10}}
	cmd.Stderr = p.stderr
	return p
}

// wait waits for the process and turns a failure into a *ToolError classified from the stderr.
func (p *proc) wait(ctx context.Context) error {
	err := p.cmd.Wait()
	if err == nil {
		return nil
	}
	return p.fail(ctx, err)
}

func (p *proc) fail(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && p.killed() {
		return fmt.Errorf("video: %s stopped: %w", p.stage, ctxErr)
	}
	tail := p.stderr.tail(6)
	for _, path := range p.redact {
		tail = strings.ReplaceAll(tail, path, filepath.Base(path))
	}
	tail = ffmpegContext.ReplaceAllString(tail, "")
	return &ToolError{Stage: p.stage, Kind: classify(p.stage, tail), Stderr: tail, Err: err}
}

// ffmpegContext matches the "[mov,mp4,... @ 0x55d98a8de1c0] " prefix of ffmpeg's log lines.
var ffmpegContext = regexp.MustCompile(`\[[^\]]* @ 0x[0-9a-f]+\] `)

// checkComplete fails with ErrTruncated when a decoder that exited cleanly still reported a cut file, or
// delivered clearly fewer frames than the container announced: ffmpeg decodes what it can and exits 0.
func (p *proc) checkComplete(frames int64, info Info) error {
	want := info.Video.Frames
	if v := info.Video; v.Duration > 0 && v.FrameRate.Valid() {
		// A video trimmed without re-encoding (a phone's or QuickTime's trim, ffmpeg -ss with -c copy) keeps all
		// its samples (nb_frames) behind an edit list that shows only some: the stream's duration is the edited
		// one, and at the base rate it counts at least the frames shown. Compared with nb_frames, a trimmed clip
		// was refused as truncated, and so was the detection of a marked video trimmed afterwards.
		if shown := int64(math.Ceil(v.Duration*v.FrameRate.Float())) + 1; shown < want {
			want = shown
		}
	}
	tail := p.stderr.tail(6)
	for _, path := range p.redact {
		tail = strings.ReplaceAll(tail, path, filepath.Base(path))
	}
	tail = ffmpegContext.ReplaceAllString(tail, "")
	if strings.Contains(tail, "partial file") {
		return fmt.Errorf("%w: %s", ErrTruncated, tail)
	}
	if want > 0 && frames < want*9/10-2 {
		return fmt.Errorf("%w: %d of %d frames decoded", ErrTruncated, frames, want)
	}
	return nil
}

// killed reports whether the process ended by a signal (ours, on cancellation) rather than exiting on its own.
func (p *proc) killed() bool {
	st := p.cmd.ProcessState
	if st == nil {
		return true // never ran to completion
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

// classify maps ffmpeg's error messages about the input file to the adapter's kinds. Everything else is
// ErrFFmpeg: a failure of the tool, not a statement about the file.
func classify(stage, stderr string) error {
	s := strings.ToLower(stderr)
	if stage != "probe" && stage != "decode" {
		if strings.Contains(s, "not currently supported in container") || strings.Contains(s, "only supported in mp4") {
			// The muxer refuses a stream copied from the source (Opus in a MOV): the file's doing, which
			// every attempt would meet again.
			return ErrUnsupported
		}
		return ErrFFmpeg
	}
	switch {
	case strings.Contains(s, "moov atom not found"), strings.Contains(s, "partial file"),
		strings.Contains(s, "truncat"), strings.Contains(s, "end of file"),
		strings.Contains(s, "error while decoding"), strings.Contains(s, "corrupt"):
		return ErrTruncated
	case strings.Contains(s, "invalid data found"), strings.Contains(s, "could not find codec parameters"),
		strings.Contains(s, "unknown format"), strings.Contains(s, "format not on whitelist"):
		return ErrNotVideo
	}
	return ErrFFmpeg
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

// tail returns the last n non-empty lines, joined with "; ".
func (t *tailBuffer) tail(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var lines []string
	for _, l := range strings.Split(string(t.buf), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}

// pipeline runs several processes connected by pipes and reports the most telling failure: a stage that failed
// on its own comes before those that only saw their pipe break.
type pipeline struct {
	procs []*proc
}

func (pl *pipeline) start(p *proc) error {
	if err := p.cmd.Start(); err != nil {
		return &ToolError{Stage: p.stage, Kind: ErrFFmpeg, Err: err}
	}
	pl.procs = append(pl.procs, p)
	return nil
}

// waitAll waits for every started process. goErr is the Go stage's error (nil when it finished cleanly).
func (pl *pipeline) waitAll(ctx context.Context, cancel context.CancelFunc, goErr error) error {
	errs := make([]error, len(pl.procs))
	var wg sync.WaitGroup
	for i, p := range pl.procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.wait(ctx)
			if errs[i] != nil {
				cancel() // one stage failed: the others cannot finish, stop them now
			}
		}()
	}
	if goErr != nil {
		cancel()
	}
	wg.Wait()
	// A tool that failed on its own says most, the decoder (about the input) first; then the Go stage; then the
	// tools that were stopped.
	for _, err := range errs {
		if err != nil && !isStopped(err) {
			return err
		}
	}
	if goErr != nil {
		return goErr
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func isStopped(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// lookTools resolves the tool paths once.
func lookTool(name, def string) (string, error) {
	if name == "" {
		name = def
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w: %s not found (run scripts/setup.sh): %w", ErrToolMissing, name, err)
	}
	return p, nil
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
