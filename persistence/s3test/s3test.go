// Package s3test runs a real S3-compatible server (versitygw, posix backend) for tests of the object-storage
// backends. One server per Start; tests take a fresh bucket each with NewBucket, which is much cheaper than a
// server each.
//
// The binary is looked up on PATH, then in $FILIGRANE_TOOLS, then in ${XDG_CACHE_HOME:-$HOME/.cache}/filigrane/bin
// (where `scripts/setup.sh --s3` installs it). When it is missing the test is skipped, unless CI is set, where
// a missing server must fail the build rather than silently drop the cluster-mode coverage.
//
// versitygw keeps object metadata (ETags, user metadata) in user extended attributes, or, where the filesystem
// has none, in a sidecar directory; Start probes and picks. FILIGRANE_S3TEST_SIDECAR=1 forces the sidecar mode.
package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

const (
	accessKey = "filigrane-test"
	region    = "us-east-1"

	startTimeout = 20 * time.Second
	stopTimeout  = 5 * time.Second
)

// Server is a running versitygw.
type Server struct {
	Endpoint  string // host:port, plain HTTP
	AccessKey string
	SecretKey string
	Region    string

	client  *minio.Client
	buckets atomic.Int64
	proc    *os.Process
	base    string // the data directory (root, sidecar) a read-only twin shares
	sidecar string // the sidecar metadata directory, "" when metadata is in extended attributes
}

// Binary returns the path of the versitygw binary, or "" when none is installed.
func Binary() string {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	var dirs []string
	if d := os.Getenv("FILIGRANE_TOOLS"); d != "" {
		dirs = append(dirs, d)
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		dirs = append(dirs, filepath.Join(d, "filigrane", "bin"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".cache", "filigrane", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "versitygw")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// UserXattrs reports whether dir's filesystem keeps user extended attributes, where versitygw's posix backend
// keeps object metadata unless given --sidecar (for harnesses that start versitygw themselves).
func UserXattrs(dir string) bool { return userXattrs(dir) }

// Start starts versitygw on a free loopback port with its data in a temporary directory and stops it when the
// test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return startFresh(t, os.Getenv("FILIGRANE_S3TEST_SIDECAR") != "")
}

// StartSidecar is Start with object metadata in a sidecar directory whatever the filesystem offers: the mode
// whose crashes leave torn objects (see TearETag).
func StartSidecar(t testing.TB) *Server {
	t.Helper()
	return startFresh(t, true)
}

func startFresh(t testing.TB, sidecar bool) *Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		msg := "versitygw not found on PATH, in $FILIGRANE_TOOLS or in ~/.cache/filigrane/bin; install it with `scripts/setup.sh --s3`"
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatal(msg)
		}
		t.Skip(msg + " (skipping; with CI set this fails)")
	}
	// The port is picked by binding :0 and releasing it, so another process can grab it before versitygw
	// binds: a failed start is retried on a new port.
	var lastErr error
	for range 3 {
		s, err := start(t, bin, t.TempDir(), false, sidecar, newSecret())
		if err == nil {
			return s
		}
		lastErr = err
	}
	t.Fatalf("s3test: start versitygw: %v", lastErr)
	return nil
}

// ReadOnlyTwin starts a second versitygw with --readonly on this server's data: the same buckets and objects,
// every write refused, as a bucket whose credentials may only read. It stops when the test ends.
func (s *Server) ReadOnlyTwin(t testing.TB) *Server {
	t.Helper()
	var lastErr error
	for range 3 {
		twin, err := start(t, Binary(), s.base, true, s.sidecar != "", s.SecretKey)
		if err == nil {
			return twin
		}
		lastErr = err
	}
	t.Fatalf("s3test: start a read-only versitygw: %v", lastErr)
	return nil
}

// newSecret is a root secret key of its own for each server: the port is picked by binding :0 and releasing
// it, so another test's versitygw can take it first, and only a request signed with this server's secret tells
// the two apart (the access key stays the same: bucket ownership follows it, and a read-only twin shares it).
func newSecret() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "filigrane-test-" + hex.EncodeToString(b)
}

func start(t testing.TB, bin, base string, readOnly, sidecar bool, secretKey string) (*Server, error) {
	root := filepath.Join(base, "root")
	if err := os.MkdirAll(root, 0o750); err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	return startAt(t, bin, base, root, addr, readOnly, sidecar, secretKey)
}

// startAt is start on a given address.
func startAt(t testing.TB, bin, base, root, addr string, readOnly, sidecar bool, secretKey string) (*Server, error) {
	args := []string{"--port", addr, "--quiet"}
	if readOnly {
		args = append(args, "--readonly")
	}
	args = append(args, "posix")
	side := ""
	if sidecar || !userXattrs(root) {
		// Both paths must be absolute and the sidecar must be outside the root, or versitygw refuses them.
		side = filepath.Join(base, "meta")
		if err := os.MkdirAll(side, 0o750); err != nil {
			return nil, err
		}
		args = append(args, "--sidecar", side)
	}
	args = append(args, root)

	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+accessKey, "ROOT_SECRET_ACCESS_KEY="+secretKey)
	out := &tailBuffer{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGCONT) // a paused server would not act on SIGTERM
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(stopTimeout):
			_ = cmd.Process.Kill()
			<-exited
		}
	}

	if err := waitListening(addr, exited); err != nil {
		stop()
		return nil, fmt.Errorf("%w; versitygw %s output:\n%s", err, strings.Join(args, " "), out.String())
	}
	client, err := minio.New(addr, &minio.Options{
		Creds:  credentials.NewStaticV4(accessKey, secretKey, ""),
		Region: region,
	})
	if err != nil {
		stop()
		return nil, err
	}
	// Whatever answered on addr may be another test's server that took the port before ours bound it (ours
	// then exits on the failed bind, maybe after the dial above): only ours accepts this secret.
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	_, err = client.ListBuckets(ctx)
	cancel()
	if err != nil {
		stop()
		return nil, fmt.Errorf("the server on %s did not accept this server's secret (another process took the port?): %w; versitygw output:\n%s",
			addr, err, out.String())
	}
	t.Logf("s3test: versitygw %s", strings.Join(args, " "))
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("versitygw output:\n%s", out.String())
		}
	})
	return &Server{Endpoint: addr, AccessKey: accessKey, SecretKey: secretKey, Region: region, client: client,
		proc: cmd.Process, base: base, sidecar: side}, nil
}

// TearETag leaves object in the state a kill -9 of versitygw in sidecar mode leaves it in when the kill lands
// inside a PUT's commit: the PUT has stored the new ETag in the sidecar directory (a file renamed into place)
// but not yet linked the new body over the old one, so the old body stays with an ETag that belongs to a body
// that was never published (or, when the object did not exist, an ETag with no object at all). The server
// then compares If-Match with that ETag for good. Only a server from StartSidecar can be torn this way; in
// extended-attribute mode the ETag travels with the file and a PUT publishes both in one rename.
func (s *Server) TearETag(t testing.TB, bucket, object, etag string) {
	t.Helper()
	if s.sidecar == "" {
		t.Fatal("s3test: TearETag needs a server from StartSidecar")
	}
	dir := filepath.Join(s.sidecar, bucket, filepath.FromSlash(object), "meta")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatalf("s3test: tear %s/%s: %v", bucket, object, err)
	}
	// versitygw stores the ETag quoted, as S3 spells it on the wire.
	if err := os.WriteFile(filepath.Join(dir, "etag"), []byte(`"`+strings.Trim(etag, `"`)+`"`), 0o640); err != nil {
		t.Fatalf("s3test: tear %s/%s: %v", bucket, object, err)
	}
}

// Pause freezes the server process (SIGSTOP): the kernel still accepts connections but nothing answers, like
// a hung or overloaded server. Resume undoes it; stopping at the end of the test resumes it first.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	if err := s.proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("s3test: pause versitygw: %v", err)
	}
	// The signal is delivered asynchronously; return once every thread has stopped.
	deadline := time.Now().Add(stopTimeout)
	for !stopped(s.proc.Pid) {
		if time.Now().After(deadline) {
			t.Fatalf("s3test: versitygw (pid %d) not stopped %s after SIGSTOP", s.proc.Pid, stopTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// Resume continues a paused server.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	if err := s.proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("s3test: resume versitygw: %v", err)
	}
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// waitListening polls until addr accepts connections, the process exits, or startTimeout passes.
func waitListening(addr string, exited <-chan error) error {
	deadline := time.Now().Add(startTimeout)
	for delay := 10 * time.Millisecond; ; delay = min(delay*2, 200*time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			select {
			case err := <-exited: // someone else's listener answered; ours died on bind
				return fmt.Errorf("versitygw exited: %v", err)
			default:
				return nil
			}
		}
		select {
		case err := <-exited:
			return fmt.Errorf("versitygw exited before listening: %v", err)
		case <-time.After(delay):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("versitygw not listening on %s after %s", addr, startTimeout)
		}
	}
}

// Client returns a client for the server with the root credentials.
func (s *Server) Client() *minio.Client { return s.client }

// NewBucket creates an empty bucket with a fresh name and returns its name.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("filigrane-test-%d", s.buckets.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.client.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: s.Region}); err != nil {
		t.Fatalf("s3test: make bucket %s: %v", name, err)
	}
	return name
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - b.max; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
