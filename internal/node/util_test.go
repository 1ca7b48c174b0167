package node_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp/fasthttputil"

	"filigrane/internal/apispec/apicheck"

	"filigrane/internal/node"
)

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

// quickRecovery are the `filigrane serve` flags of crash tests that kill a node and restart it on its data
// directory: the restarted node takes the dead one's sweeper lease over after 4 s instead of 30 s, sweeps
// every second, and retries the jobs the dead one was running once their 6 s lease (instead of 30 s) lapsed,
// so that what the restarted node repeats (owed deliveries, batch ticks, attempts) happens within seconds.
// The behaviour under test is the same; only its waits are shorter.
var quickRecovery = []string{"--sweep-interval", "1s", "--sweeper-lease", "4s", "--job-lease", "6s"}

// TestMain removes what the package's tests share across tests: the filigrane binary the multi-process
// tests run (buildBinary).
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// Tests of the API's answers listen in memory (inMemory): no process boundary is under test there. Each
// in-memory listener gets a host name of its own, which the default HTTP client (and dial) resolve to it.
// Tests that reach watchDisconnect (synchronous detections) stay on TCP: a fasthttputil pipe's Read blocked
// without a deadline is not woken by a later SetReadDeadline, which is how the watch stops. Connection
// limits and clusters stay on TCP too.
var (
	inmemListeners sync.Map // "name:80" -> *fasthttputil.InmemoryListener
	inmemCount     atomic.Int64
)

type inmemAddr string

func (a inmemAddr) Network() string { return "tcp" }
func (a inmemAddr) String() string  { return string(a) }

func init() {
	tr := http.DefaultTransport.(*http.Transport)
	tcp := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if ln, ok := inmemListeners.Load(addr); ok {
			return ln.(*fasthttputil.InmemoryListener).Dial()
		}
		return tcp(ctx, network, addr)
	}
	// Every answer the tests read through the default client is checked against the OpenAPI document, so
	// that the document cannot drift from the handlers: a mismatch fails the request with the reason.
	chk, err := apicheck.New()
	if err != nil {
		panic(err)
	}
	http.DefaultClient.Transport = apicheck.Transport{Base: tr, Checker: chk}
}

// newInmemListener is an in-memory listener whose address, kind-N.inmem:80, reaches it from this package's
// HTTP clients.
func newInmemListener(t *testing.T, kind string) net.Listener {
	ln := fasthttputil.NewInmemoryListener()
	addr := fmt.Sprintf("%s-%d.inmem:80", kind, inmemCount.Add(1))
	ln.SetLocalAddr(inmemAddr(addr))
	inmemListeners.Store(addr, ln)
	t.Cleanup(func() { inmemListeners.Delete(addr) })
	return ln
}

// inMemory makes a node listen in memory.
func inMemory(t *testing.T) func(*node.Config) {
	return func(c *node.Config) {
		c.APIListener, c.UploadListener = newInmemListener(t, "api"), newInmemListener(t, "upload")
	}
}

// dial opens a raw connection to a node's listener, in memory or TCP.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	var c net.Conn
	var err error
	if ln, ok := inmemListeners.Load(addr); ok {
		c, err = ln.(*fasthttputil.InmemoryListener).Dial()
	} else {
		c, err = net.Dial("tcp", addr)
	}
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
