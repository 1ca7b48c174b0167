package node_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestChunkedFormThenNextRequest: a form sent with chunked transfer encoding (Go's and other clients do so
// when they stream a file) is consumed to its end on every media route, so the next request on the same
// keep-alive connection is answered as itself. Before the fix the sync embed left the chunked trailer
// unread and the server answered the next request with 400 bad_request (a desynchronised connection).
func TestChunkedFormThenNextRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	img := photo(t, 800, 600, 13)
	ct, body := form(t, img, "p.jpg", `{"a":1}`)
	for _, path := range []string{"/watermarks/images", "/watermarks/images/detect", "/watermarks/images/async"} {
		c := dial(t, f.n.APIAddr())
		_ = c.SetDeadline(time.Now().Add(60 * time.Second))
		w := bufio.NewWriter(c)
		fmt.Fprintf(w, "POST %s HTTP/1.1\r\nHost: x\r\nX-API-Key: %s\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n\r\n", path, f.keyA, ct)
		for off := 0; off < len(body); off += 32 << 10 {
			end := min(len(body), off+32<<10)
			fmt.Fprintf(w, "%x\r\n", end-off)
			w.Write(body[off:end])
			w.WriteString("\r\n")
		}
		w.WriteString("0\r\n\r\n")
		fmt.Fprintf(w, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		first, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: first answer: %v", path, err)
		}
		b, _ := io.ReadAll(first.Body)
		if first.StatusCode >= 300 {
			t.Fatalf("%s: chunked form: %d %s", path, first.StatusCode, b)
		}
		if first.Close {
			c.Close()
			continue // the server closed instead of reading on: also safe
		}
		second, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: second answer on the connection: %v", path, err)
		}
		b, _ = io.ReadAll(second.Body)
		if second.StatusCode != 200 {
			t.Fatalf("%s: the request after a chunked form was answered %d %s", path, second.StatusCode, b)
		}
		c.Close()
	}
}
