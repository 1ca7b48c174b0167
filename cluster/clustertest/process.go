package clustertest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProcessConfig describes N copies of an already built binary. The harness
// builds nothing: tests pass a binary they built (or os.Args[0] with a
// helper-process switch in TestMain).
type ProcessConfig struct {
	// Binary is the path of the executable.
	Binary string
	// N is the number of processes.
	N int
	// Ports is how many free 127.0.0.1 ports each process gets (for
	// example HTTP, remote and gossip). Each port is free for both TCP and
	// UDP when allocated (memberlist uses both on the gossip port).
	Ports int
	// Args returns the command-line arguments of process i. ports[i] are
	// the ports of process i; all processes' ports are given so that
	// process i can be told to join process 0.
	Args func(i int, ports [][]int) []string
	// Env is added to the environment of every process.
	Env []string
	// Ready reports when process i is ready; default ReadyLine("READY").
	Ready ReadyFunc
	// Output, when set, also receives every process's output lines,
	// prefixed with the process index (for example os.Stderr while
	// debugging).
	Output io.Writer
}

// SeedList is the --join value that names every process's port number portIndex on 127.0.0.1, its own
// included, as operators do with a fixed seed list: a process restarted later (the first one too) finds the
// others again.
func SeedList(ports [][]int, portIndex int) string {
	seeds := make([]string, len(ports))
	for i, q := range ports {
		seeds[i] = fmt.Sprintf("127.0.0.1:%d", q[portIndex])
	}
	return strings.Join(seeds, ",")
}

// ReadyFunc waits until p is ready or ctx ends.
type ReadyFunc func(ctx context.Context, p *Process) error

// ReadyLine waits for an output line (stdout or stderr) matching re.
func ReadyLine(re string) ReadyFunc {
	rx := regexp.MustCompile(re)
	return func(ctx context.Context, p *Process) error {
		_, err := p.WaitLine(ctx, rx)
		return err
	}
}

// ReadyTCP waits until the process's port number portIndex accepts TCP, on a socket the process itself
// listens on (see ownsPort).
func ReadyTCP(portIndex int) ReadyFunc {
	return func(ctx context.Context, p *Process) error {
		port := p.Ports[portIndex]
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		return poll(ctx, p, func() bool {
			c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
			if err != nil {
				return false
			}
			c.Close()
			return p.ownsPort(port)
		})
	}
}

// ReadyHTTP waits until GET http://127.0.0.1:<port>/<path> answers 2xx, from a socket the process itself
// listens on (see ownsPort).
func ReadyHTTP(portIndex int, path string) ReadyFunc {
	return func(ctx context.Context, p *Process) error {
		port := p.Ports[portIndex]
		url := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/" + strings.TrimPrefix(path, "/")
		client := &http.Client{Timeout: time.Second}
		return poll(ctx, p, func() bool {
			resp, err := client.Get(url)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode/100 == 2 && p.ownsPort(port)
		})
	}
}

// ownsPort reports whether the process listens on port itself. FreePorts releases the ports it picks, so
// another test's process can take one before this process binds it: this process then exits on the failed
// bind, but a probe that only dialled the port would have found the other one ready and handed the test a
// stranger. Where the system cannot tell (no /proc), it trusts the answer.
func (p *Process) ownsPort(port int) bool {
	listening, ok := listensOn(p.Pid(), port)
	return listening || !ok
}

func poll(ctx context.Context, p *Process, ok func() bool) error {
	t := time.NewTicker(25 * time.Millisecond)
	defer t.Stop()
	for !ok() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("process %d not ready: %w", p.Index, ctx.Err())
		case <-p.Exited():
			return fmt.Errorf("process %d exited before it was ready: %v", p.Index, p.exitError())
		case <-t.C:
		}
	}
	return nil
}

// Process is one running copy.
type Process struct {
	Index int
	Ports []int

	cfg  *ProcessConfig
	args []string

	mu      sync.Mutex
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   []string
	dropped int           // lines trimmed from the front of lines
	changed chan struct{} // closed and replaced when a line arrives
	exited  chan struct{}
	exitErr error
}

// Processes is a set of running copies.
type Processes struct {
	List []*Process
}

// StartProcesses allocates ports, starts cfg.N processes and waits until all
// are ready (in parallel) or ctx ends. On error every process is killed and
// the error carries the tail of the failing process's output.
func StartProcesses(ctx context.Context, cfg ProcessConfig) (*Processes, error) {
	if cfg.Binary == "" || cfg.N <= 0 || cfg.Args == nil {
		return nil, errors.New("clustertest: process config needs Binary, N > 0 and Args")
	}
	if cfg.Ready == nil {
		cfg.Ready = ReadyLine("READY")
	}
	// A port picked by FreePorts can be taken by another test's process before ours binds it: ours then
	// exits saying so, and the set starts again on other ports.
	for attempt := 1; ; attempt++ {
		ps, err := startProcesses(ctx, &cfg)
		if err == nil || attempt == 3 || !errors.Is(err, errPortTaken) {
			return ps, err
		}
	}
}

// errPortTaken marks a start that failed because a process could not bind one of its ports.
var errPortTaken = errors.New("a port was taken before the process bound it")

func startProcesses(ctx context.Context, cfg *ProcessConfig) (*Processes, error) {
	ports, err := FreePorts(cfg.N * cfg.Ports)
	if err != nil {
		return nil, err
	}
	all := make([][]int, cfg.N)
	for i := range all {
		all[i] = ports[i*cfg.Ports : (i+1)*cfg.Ports]
	}
	ps := &Processes{}
	for i := 0; i < cfg.N; i++ {
		p := &Process{Index: i, Ports: all[i], cfg: cfg, args: cfg.Args(i, all)}
		if err := p.start(); err != nil {
			ps.KillAll()
			return nil, err
		}
		ps.List = append(ps.List, p)
	}
	errs := make(chan error, len(ps.List))
	for _, p := range ps.List {
		go func(p *Process) {
			if err := cfg.Ready(ctx, p); err != nil {
				tail := p.Tail(30)
				if strings.Contains(tail, "address already in use") {
					err = fmt.Errorf("%w: %w", err, errPortTaken)
				}
				errs <- fmt.Errorf("clustertest: %w\n%s", err, tail)
				return
			}
			errs <- nil
		}(p)
	}
	var first error
	for range ps.List {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		ps.KillAll()
		return nil, first
	}
	return ps, nil
}

func (p *Process) start() error {
	cmd := exec.Command(p.cfg.Binary, p.args...)
	cmd.Env = append(os.Environ(), p.cfg.Env...)
	dieWithParent(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("clustertest: process %d: %w", p.Index, err)
	}
	cmd.Stderr = cmd.Stdout // one ordered stream
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("clustertest: process %d: %w", p.Index, err)
	}
	p.mu.Lock()
	p.cmd = cmd
	p.stdin = stdin
	p.changed = make(chan struct{})
	p.exited = make(chan struct{})
	p.exitErr = nil
	p.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("clustertest: start process %d (%s): %w", p.Index, p.cfg.Binary, err)
	}
	exited := p.exited
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			p.addLine(sc.Text())
		}
		err := cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(exited)
	}()
	return nil
}

const maxLines = 5000

func (p *Process) addLine(l string) {
	if p.cfg.Output != nil {
		fmt.Fprintf(p.cfg.Output, "[%d] %s\n", p.Index, l)
	}
	p.mu.Lock()
	p.lines = append(p.lines, l)
	if len(p.lines) > maxLines {
		drop := len(p.lines) - maxLines/2
		p.lines = append(p.lines[:0:0], p.lines[drop:]...)
		p.dropped += drop
	}
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// WaitLine returns the first output line (of this run) matching re.
func (p *Process) WaitLine(ctx context.Context, re *regexp.Regexp) (string, error) {
	seen := 0 // absolute line number
	scan := func() (string, bool) {
		p.mu.Lock()
		defer p.mu.Unlock()
		seen = max(seen, p.dropped)
		for ; seen < p.dropped+len(p.lines); seen++ {
			if l := p.lines[seen-p.dropped]; re.MatchString(l) {
				return l, true
			}
		}
		return "", false
	}
	for {
		p.mu.Lock()
		changed, exited := p.changed, p.exited
		p.mu.Unlock()
		if l, ok := scan(); ok {
			return l, nil
		}
		select {
		case <-changed:
		case <-exited:
			if l, ok := scan(); ok { // lines stored just before the exit
				return l, nil
			}
			return "", fmt.Errorf("process %d exited (%v) without a line matching %q", p.Index, p.exitError(), re)
		case <-ctx.Done():
			return "", fmt.Errorf("process %d: waiting for a line matching %q: %w", p.Index, re, ctx.Err())
		}
	}
}

// Send writes a line to the process's standard input (for test binaries
// that take commands there).
func (p *Process) Send(line string) error {
	p.mu.Lock()
	w := p.stdin
	p.mu.Unlock()
	if _, err := io.WriteString(w, line+"\n"); err != nil {
		return fmt.Errorf("clustertest: process %d: send: %w", p.Index, err)
	}
	return nil
}

// Ask sends a command line and waits for the first output line matching re
// (give the command a unique token and match it in re).
func (p *Process) Ask(ctx context.Context, line string, re *regexp.Regexp) (string, error) {
	if err := p.Send(line); err != nil {
		return "", err
	}
	return p.WaitLine(ctx, re)
}

// Tail returns the last n output lines.
func (p *Process) Tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	from := max(0, len(p.lines)-n)
	return strings.Join(p.lines[from:], "\n")
}

func (p *Process) exitError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// Pid is the OS process id of the current run.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// Exited is closed when the current run has exited.
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// Kill sends SIGKILL (a crash: no cleanup, no goodbye) and waits for exit.
func (p *Process) Kill() error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("clustertest: kill process %d: %w", p.Index, err)
	}
	<-exited
	return nil
}

// Stop sends SIGTERM and waits for exit; after ctx ends it sends SIGKILL.
func (p *Process) Stop(ctx context.Context) error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("clustertest: stop process %d: %w", p.Index, err)
	}
	select {
	case <-exited:
		return nil
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("clustertest: process %d ignored SIGTERM: %w", p.Index, ctx.Err())
	}
}

// Pause stops the process with SIGSTOP (like a long GC pause or a frozen
// VM: sockets stay open, nothing answers); Resume continues it.
func (p *Process) Pause() error { return p.signal(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (p *Process) Resume() error { return p.signal(syscall.SIGCONT) }

// Starve keeps the process stopped (SIGSTOP) for stopped out of every stopped+running, as a node whose machine
// gives it a fraction of a core would be (its workers, actors, gossip and HTTP all wait), until end is called;
// end leaves it running, may be called more than once, and returns the first signalling error.
func (p *Process) Starve(stopped, running time.Duration) (end func() error) {
	done := make(chan struct{})
	ended := make(chan error, 1)
	go func() {
		var err error
		defer func() { ended <- err }()
		for {
			if err = p.Pause(); err != nil {
				return
			}
			select {
			case <-done:
			case <-time.After(stopped): // the duty cycle itself, not a wait for an event
			}
			if err = p.Resume(); err != nil {
				return
			}
			select {
			case <-done:
				return
			case <-time.After(running):
			}
		}
	}()
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() {
			close(done)
			err = <-ended
		})
		return err
	}
}

func (p *Process) signal(sig os.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("clustertest: signal %v to process %d: %w", sig, p.Index, err)
	}
	return nil
}

// Restart starts the process again with the same arguments and ports
// (after it exited) and waits until it is ready.
func (p *Process) Restart(ctx context.Context) error {
	select {
	case <-p.Exited():
	default:
		return fmt.Errorf("clustertest: restart process %d: still running", p.Index)
	}
	p.mu.Lock()
	p.lines, p.dropped = nil, 0
	p.mu.Unlock()
	if err := p.start(); err != nil {
		return err
	}
	if err := p.cfg.Ready(ctx, p); err != nil {
		return fmt.Errorf("clustertest: restart: %w\n%s", err, p.Tail(30))
	}
	return nil
}

// KillAll kills every process that is still running.
func (ps *Processes) KillAll() {
	for _, p := range ps.List {
		select {
		case <-p.Exited():
		default:
			_ = p.Kill()
		}
	}
}

// FreePorts returns n distinct 127.0.0.1 ports that were free for both TCP and UDP a moment ago, chosen at
// random below the kernel's ephemeral range (net.ipv4.ip_local_port_range) where that range can be read.
// The kernel gives ports of that range to every listen on port 0 and to every outgoing connection, so a port
// picked there can be taken by another listener or connection before the process that was given it binds it:
// with tests running in parallel (in-process nodes listening on port 0, clients connecting) a process of
// TestPlacementByRolesAndJoin died on "address already in use". Below the range only another program that
// picks ports itself can take one. Where the range cannot be read, the kernel's port 0 choice is used. A port
// once given out is not given out again while the process that got it runs, here or by another test binary
// (reservePort): a node restarted on its ports finds them free.
func FreePorts(n int) ([]int, error) {
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	low, high := pickRange()
	ports := make([]int, 0, n)
	for attempts := 0; len(ports) < n; attempts++ {
		if attempts > 100*n {
			return nil, fmt.Errorf("clustertest: could not find %d free ports", n)
		}
		want := 0
		if high > low {
			want = low + rand.IntN(high-low)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(want)))
		if err != nil {
			if want != 0 {
				continue // taken
			}
			return nil, fmt.Errorf("clustertest: free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			l.Close()
			continue
		}
		if !reservePort(port) { // given out before, by this process or another, perhaps to a node now restarting
			l.Close()
			u.Close()
			continue
		}
		held = append(held, l, u) // held until all are chosen: no duplicates
		ports = append(ports, port)
	}
	return ports, nil
}

// pickRange is where FreePorts picks: from 10000 up to the start of the ephemeral range, or 0, 0 (let the
// kernel choose) when the range cannot be read or leaves too little room below it.
func pickRange() (low, high int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	ephemeral, err := strconv.Atoi(f[0])
	if err != nil || ephemeral < 12000 {
		return 0, 0
	}
	return 10000, ephemeral
}
