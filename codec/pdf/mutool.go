package pdf

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"
)

// mutoolRunner is the one place mutool processes start: the renderer's draw (render.go), the quick read of the
// structural mark's show (detect.go), the repair pass's and the decryption's clean (detect.go, decrypt.go).
// Each process gets an address-space limit (ulimit -v), a limit on the size of what it writes when the use
// bounds it (ulimit -f), its own process group, killed whole when its context ends (a child it started goes
// with it), and its error messages kept (the first 2 KiB) for the error that reports its failure.
type mutoolRunner struct {
	path   string // mutool's path, or its name on PATH
	memory int64  // address-space limit of each process in bytes (Limits.RenderMemory; at least 64 MiB)
	// trace, when set (tests), is called with each process's arguments as it is started.
	trace func(args []string)
}

// runner is the adapter's mutool under the memory limit of lim.
func (a *Adapter) runner(lim Limits) mutoolRunner {
	var trace func([]string)
	if a.trace != nil {
		trace = func(args []string) { a.trace("mutool " + args[0]) }
	}
	return mutoolRunner{path: a.mutool(), memory: lim.RenderMemory, trace: trace}
}

// available reports whether mutool can be found, without running it: nil, or an *Error with CodeTool.
func (m mutoolRunner) available() error {
	if _, err := exec.LookPath(m.path); err != nil {
		return &Error{Code: CodeTool, Reason: "the PDF renderer (mutool) is not installed", Err: err}
	}
	return nil
}

// command is mutool with args, not started. ctx's end kills its process group. fileSize, when above zero, bounds
// in bytes each file it writes (its output file: a larger one ends it with SIGXFSZ, "file size limit exceeded").
// Its error messages go to the returned buffer.
func (m mutoolRunner) command(ctx context.Context, fileSize int64, args ...string) (*exec.Cmd, *limitedBuffer) {
	// ulimit -v counts KiB, ulimit -f 512-byte blocks; exec keeps the shell out of the process tree.
	script := fmt.Sprintf(`ulimit -v %d 2>/dev/null; `, max(m.memory>>10, 64<<10))
	if fileSize > 0 {
		script += fmt.Sprintf(`ulimit -f %d 2>/dev/null; `, fileSize/512+1)
	}
	script += `exec "$0" "$@"`
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", script, m.path}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	stderr := &limitedBuffer{}
	cmd.Stderr = stderr
	if m.trace != nil {
		m.trace(args)
	}
	return cmd, stderr
}

// run runs mutool with args to its end, within timeout, its output into stdout (nil: kept with its error
// messages, which a failure's error then quotes) and fileSize as command's.
func (m mutoolRunner) run(ctx context.Context, timeout time.Duration, fileSize int64, stdout io.Writer, args ...string) error {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd, stderr := m.command(rctx, fileSize, args...)
	cmd.Stdout = stdout
	if stdout == nil {
		cmd.Stdout = stderr
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("mutool %s: %w: %s", args[0], err, stderr.String())
	}
	return nil
}

// limitedBuffer keeps the first 2 KiB written to it (a mutool process's error messages, or a short answer).
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 2048 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
