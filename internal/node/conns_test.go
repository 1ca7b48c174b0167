package node_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	apihttp "filigrane/http"
	"filigrane/internal/clock"
	"filigrane/internal/node"
)

// TestSlowClientsCannotStopNode opens more connections that send headers slowly than a listener allows. A
// new client must still be answered (503 while the listener is full), the slow connections must be closed by
// the server at the header timeout, and the node must go on answering on both listeners.
func TestSlowClientsCannotStopNode(t *testing.T) {
	t.Parallel()
	const limit = 8
	clk := clock.NewManual(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))
	n := startNode(t, t.TempDir(), clk, func(c *node.Config) {
		c.Conns = apihttp.ConnLimits{MaxConns: limit, MaxConnsPerIP: limit, HeaderTimeout: 2 * time.Second, IdleTimeout: 2 * time.Second}
	})
	defer stopNode(t, n)

	for _, addr := range []string{n.APIAddr(), n.UploadAddr()} {
		var slow []net.Conn
		for range 3 * limit {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// A request line and half a header, then nothing.
			if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")); err != nil {
				t.Fatal(err)
			}
			slow = append(slow, c)
		}

		// A new client is answered at once: 503 while the slow ones hold the listener, or 200 if the server
		// already closed them.
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("%s: a new client was not answered: %v", addr, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 && resp.StatusCode != 200 {
			t.Fatalf("%s: new client: %d %s", addr, resp.StatusCode, body)
		}

		// Every slow connection is closed by the server: the ones over the limit at once with 503, the
		// others at the header timeout with 408. The deadline is only a bound for a broken server.
		counts := map[int]int{}
		for i, c := range slow {
			_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
			br := bufio.NewReader(c)
			r, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s: slow connection %d: no answer before close: %v", addr, i, err)
			}
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			counts[r.StatusCode]++
			if r.StatusCode == 503 {
				// A refusal is an error like any other: the table's code, and a request id in the header and
				// the body (it was "unavailable", a code of no table, without an id).
				var p struct {
					Code      string `json:"code"`
					RequestID string `json:"request_id"`
				}
				if err := json.Unmarshal(b, &p); err != nil || p.Code != "service_unavailable" ||
					!strings.HasPrefix(p.RequestID, "req_") || p.RequestID != r.Header.Get("X-Request-ID") ||
					r.Header.Get("Retry-After") != "1" {
					t.Fatalf("%s: slow connection %d refused with %v %s", addr, i, r.Header, b)
				}
			}
			if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("%s: slow connection %d was not closed by the server", addr, i)
				}
				t.Fatalf("%s: slow connection %d: %v", addr, i, err)
			}
		}
		if counts[503] < limit || counts[408] == 0 || counts[503]+counts[408] != 3*limit {
			t.Fatalf("%s: slow connections were answered %v; want about %d refused (503), the rest timed out (408)", addr, counts, 2*limit)
		}

		// The node is alive and has its places back.
		resp, err = http.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("%s: after the slow clients: %v", addr, err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"ok"`) {
			t.Fatalf("%s: after the slow clients: %d %s", addr, resp.StatusCode, body)
		}
	}
	// Operators see the refusals.
	m := call(t, "GET", "http://"+n.APIAddr()+"/metrics", "", nil)
	for _, l := range []string{"api", "upload"} {
		re := regexp.MustCompile(`filigrane_connections_refused_total\{listener="` + l + `"\} (\d+)`)
		got := re.FindSubmatch(m.body)
		if got == nil {
			t.Fatalf("no refusal count for the %s listener in /metrics", l)
		}
		if v, _ := strconv.Atoi(string(got[1])); v < limit {
			t.Fatalf("%s listener: %d refusals counted, want at least %d", l, v, limit)
		}
	}
}

// TestSlowBodyOutlivesHeaderTimeout: a PUT whose body keeps arriving is bounded by its progress, not by the
// header timeout; the same PUT stalling past the progress timeout is cut off and stores nothing.
func TestSlowBodyOutlivesHeaderTimeout(t *testing.T) {
	t.Parallel()
	const headerTimeout = 500 * time.Millisecond
	f := newFixture(t, func(c *node.Config) {
		c.Conns = apihttp.ConnLimits{HeaderTimeout: headerTimeout, BodyProgress: 3 * time.Second}
	})
	body := bytes.Repeat([]byte("slow"), 4<<10) // 16 KiB in 4 pieces
	u := createUpload(t, f, f.dev.Secret, "detect", "x.png", len(body))
	c := startPut(t, u.Upload.URL, len(body), body[:4<<10])
	start := time.Now()
	for i := 1; i < 4; i++ {
		// The client's pace (not synchronisation): the whole body takes three header timeouts.
		time.Sleep(headerTimeout)
		if _, err := c.Write(body[i*4<<10 : (i+1)*4<<10]); err != nil {
			t.Fatalf("piece %d after %s: %v", i, time.Since(start), err)
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("slow PUT over %s: %d %s", time.Since(start), res.StatusCode, b)
	}

	// A body that stops: the server closes the connection at the progress timeout and keeps nothing.
	u2 := createUpload(t, f, f.dev.Secret, "detect", "y.png", len(body))
	before := uploadFiles(t, f)
	c2 := startPut(t, u2.Upload.URL, len(body), body[:4<<10])
	_ = c2.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err = io.ReadAll(c2) // the server's answer, if any, then its close
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("a stalled body was not cut off")
	}
	waitPut(t, f, u2.UploadID, false)
	if n := uploadFiles(t, f); n != before {
		t.Fatalf("a stalled PUT left %d files (before: %d)", n, before)
	}
}
