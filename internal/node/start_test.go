package node_test

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/cluster/clustertest"
	"filigrane/internal/clock"
	"filigrane/internal/node"
	"filigrane/persistence/s3test"
)

// s3Config points a node at a fresh, empty bucket on srv.
func s3Config(t *testing.T, srv *s3test.Server) *node.S3Config {
	return &node.S3Config{Endpoint: "http://" + srv.Endpoint, Bucket: srv.NewBucket(t),
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Region: srv.Region}
}

// freeAddr is a free address on 127.0.0.1 for a listener the test binds later. A port the kernel picks for :0 is
// in the ephemeral range, where a connection from any test of the suite can take it as its local port before the
// node binds it (a clean-clone run: "bind: address already in use"): clustertest.FreePorts picks below that range
// and reserves the port for the suite.
func freeAddr(t *testing.T) string {
	t.Helper()
	ports, err := clustertest.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
}

// TestFailedStartKeepsBootstrap starts a node whose upload address is taken, on an empty data directory (and,
// in cluster mode, an empty bucket). The start fails with an error rather than a panic, releases what it had
// bound, and leaves the development bootstrap unused: the next start creates the development key, which works.
func TestFailedStartKeepsBootstrap(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"single", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			clk := clock.NewManual(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))
			var s3 *node.S3Config
			if mode == "cluster" {
				s3 = s3Config(t, s3test.Start(t))
			}
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			apiAddr := freeAddr(t)
			cfg := node.Config{DataDir: dir, APIAddr: apiAddr, UploadAddr: taken.Addr().String(), NodeName: "test",
				Logger: zerolog.Nop(), Clock: clk, Bootstrap: true, SweepInterval: -1, S3: s3}
			n, err := node.Start(context.Background(), cfg)
			if err == nil {
				stopNode(t, n)
				t.Fatal("start with a taken upload address succeeded")
			}
			if !strings.Contains(err.Error(), "listen for uploads") {
				t.Fatalf("start error = %v, want the upload listener's", err)
			}

			// Same API address: the failed start closed its listener. Same data: the bootstrap is still to do.
			cfg.UploadAddr = "127.0.0.1:0"
			n, err = node.Start(context.Background(), cfg)
			if err != nil {
				t.Fatalf("second start: %v", err)
			}
			t.Cleanup(func() { stopNode(t, n) })
			if n.DevOrg == nil || !strings.HasPrefix(n.DevOrg.Secret, "fgk_") {
				t.Fatalf("second start did not create the development key: %+v", n.DevOrg)
			}
			r := call(t, "GET", "http://"+n.APIAddr()+"/auth/api-key", n.DevOrg.Secret, nil)
			if r.status != 200 {
				t.Fatalf("development key: status %d: %s", r.status, r.body)
			}
		})
	}
}

func TestCloseNilNode(t *testing.T) {
	t.Parallel()
	var n *node.Node
	if err := n.Close(context.Background()); err != nil {
		t.Fatalf("Close on nil = %v", err)
	}
}

type readiness struct {
	status int
	checks map[string]string
	code   string
}

func getReady(t *testing.T, url string) readiness {
	t.Helper()
	r := call(t, "GET", url, "", nil)
	var body struct {
		Checks map[string]string `json:"checks"`
		Code   string            `json:"code"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("GET %s: status %d, body %s: %v", url, r.status, r.body, err)
	}
	if r.status != 200 {
		decodeProblem(t, r)
	}
	return readiness{status: r.status, checks: body.Checks, code: body.Code}
}

// TestReadiness runs a cluster-mode node on a real versitygw: /readyz (API and upload host) is 200 with every
// check ok; with the storage server frozen (SIGSTOP) it is 503 service_unavailable naming the storage check,
// within its 2 s budget, while /healthz (liveness) stays 200; with the server back it is 200 again.
func TestReadiness(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	clk := clock.NewManual(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))
	n := startNode(t, t.TempDir(), clk, func(c *node.Config) { c.S3 = s3Config(t, srv) })
	t.Cleanup(func() { stopNode(t, n) })
	urls := []string{"http://" + n.APIAddr() + "/readyz", "http://" + n.UploadAddr() + "/readyz"}
	for _, u := range urls {
		r := getReady(t, u)
		if r.status != 200 || r.checks["storage"] != "ok" || r.checks["cluster"] != "ok" {
			t.Fatalf("GET %s with storage up = %+v, want 200 with storage and cluster ok", u, r)
		}
	}

	srv.Pause(t)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			srv.Resume(t)
		}
	})
	for _, u := range urls {
		start := time.Now()
		r := getReady(t, u)
		if r.status != 503 || r.code != "service_unavailable" || r.checks["storage"] == "ok" || r.checks["cluster"] != "ok" {
			t.Fatalf("GET %s with storage frozen = %+v, want 503 service_unavailable, storage failed, cluster ok", u, r)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("GET %s took %s with storage frozen; the check has a 2 s budget", u, took)
		}
	}
	if r := call(t, "GET", "http://"+n.APIAddr()+"/healthz", "", nil); r.status != 200 {
		t.Fatalf("/healthz with storage frozen: status %d, want 200 (the process is alive)", r.status)
	}

	srv.Resume(t)
	resumed = true
	for _, u := range urls {
		if r := getReady(t, u); r.status != 200 || r.checks["storage"] != "ok" {
			t.Fatalf("GET %s with storage back = %+v, want 200", u, r)
		}
	}
}

// An object storage endpoint given with credentials in its URL stops the start with an error that says where
// credentials go and does not repeat the password: it went to the log with every error naming the endpoint.
func TestS3EndpointWithCredentialsRefused(t *testing.T) {
	t.Parallel()
	_, err := node.OpenStorage(context.Background(), t.TempDir(),
		&node.S3Config{Endpoint: "http://filigrane:s3cr3t-in-url@127.0.0.1:1", Bucket: "b", AccessKey: "a", SecretKey: "s"},
		zerolog.Nop())
	if err == nil {
		t.Fatal("opened storage at an unreachable endpoint")
	}
	if strings.Contains(err.Error(), "s3cr3t-in-url") || !strings.Contains(err.Error(), "--s3-secret-key") {
		t.Fatalf("error = %q, want it to name --s3-secret-key without the URL's password", err)
	}
}
