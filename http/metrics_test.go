package http

import (
	"context"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"strings"
	"testing"
	"time"
)

// TestMetricsMethodLabelIsBounded: requests with made-up methods (no key needed) are counted under
// method="other", not one series per method; before, each distinct method became a series kept for the life
// of the process, so a client could grow the node's memory and /metrics without bound.
func TestMetricsMethodLabelIsBounded(t *testing.T) {
	s := New(Config{})
	base := serveOnLoopback(t, s)
	client := &nethttp.Client{Timeout: 10 * time.Second}
	do := func(method, path string) (int, string) {
		req, err := nethttp.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const n = 40
	long := "X" + strings.Repeat("Y", 2000)
	for i := range n {
		m := fmt.Sprintf("MADEUP%d", i)
		if i == 0 {
			m = long
		}
		if status, _ := do(m, "/healthz"); status != 405 {
			t.Fatalf("%s /healthz: %d, want 405", m[:min(len(m), 10)], status)
		}
	}
	if status, _ := do("GET", "/healthz"); status != 200 {
		t.Fatalf("GET /healthz: %d", status)
	}
	status, body := do("GET", "/metrics")
	if status != 200 {
		t.Fatalf("GET /metrics: %d", status)
	}
	if strings.Contains(body, "MADEUP") || strings.Contains(body, "XYYY") {
		t.Fatalf("/metrics holds series named after the made-up methods:\n%s", body)
	}
	for _, want := range []string{
		fmt.Sprintf(`filigrane_http_requests_total{method="other",route="unmatched",status="405"} %d`, n),
		`filigrane_http_requests_total{method="GET",route="/healthz",status="200"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("/metrics lacks %s:\n%s", want, body)
		}
	}
}

// serveOnLoopback serves s on a new 127.0.0.1 listener until the test ends (then shuts it down, waiting up to
// 5 s) and returns its base URL.
func serveOnLoopback(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-served
	})
	return "http://" + ln.Addr().String()
}
