package node_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"filigrane/internal/authlimit"
	"filigrane/internal/clientaddr"
	"filigrane/internal/clock"
	"filigrane/internal/node"
)

// forwarded sends method path to base over TCP from 127.0.0.1 with the given X-Forwarded-For (none when
// empty), API key and console session cookie, as a reverse proxy on this host would. A POST carries a
// sign-in form without its security token.
func forwarded(t *testing.T, method, base, path, xff, key, session string) response {
	t.Helper()
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader("email=nobody%40example.com&password=wrong")
	}
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if xff != "" {
		req.Header.Set(clientaddr.Header, xff)
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	if session != "" {
		req.AddCookie(&http.Cookie{Name: "filigrane_session", Value: session})
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// TestTrustedProxyClientAddress: behind a reverse proxy every connection comes from the proxy, so one client
// spending the per-address budgets (unknown API keys, console session cookies and invitation links, console
// sign-ins) used to get everyone behind it refused. With the proxy trusted, the budgets are per forwarded
// client, read from the right of X-Forwarded-For so a client cannot pick its own address; without it, the
// header changes nothing.
func TestTrustedProxyClientAddress(t *testing.T) {
	t.Parallel()
	const clientX, clientY = "203.0.113.1", "2001:db8:7::9"
	unknown := func(i int) string { return fmt.Sprintf("fgk_%016x_notasecret", 0xbeef0000+i) }
	want := func(what string, r response, status int) {
		t.Helper()
		if r.status != status {
			t.Fatalf("%s: %d, want %d: %s", what, r.status, status, r.body)
		}
	}
	// spend uses up the unknown-key bucket of whoever xff makes the client.
	spend := func(base, xff string) {
		t.Helper()
		for i := range authlimit.DefaultBurst {
			want(fmt.Sprintf("unknown key %d", i), forwarded(t, "GET", base, "/auth/api-key", xff, unknown(i), ""), 401)
		}
		r := forwarded(t, "GET", base, "/auth/api-key", xff, unknown(1000), "")
		want("an unknown key past the bucket", r, 429)
		if p := decodeProblem(t, r); p.Code != "rate_limited" {
			t.Fatalf("past the bucket: code %q", p.Code)
		}
	}

	trusted, err := clientaddr.ParseProxies("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(time.Date(2026, 5, 4, 10, 0, 30, 0, time.UTC)) // never advanced: no token comes back
	behind := startNode(t, t.TempDir(), clk, func(c *node.Config) { c.TrustedProxies = trusted })
	t.Cleanup(func() { stopNode(t, behind) })
	base := "http://" + behind.APIAddr()

	spend(base, clientX)
	get := func(xff, key string) response { return forwarded(t, "GET", base, "/auth/api-key", xff, key, "") }
	want("another client's unknown key", get(clientY, unknown(2000)), 401)
	want("the proxy's own request", get("", unknown(2001)), 401)
	want("client X claiming to be Y in front of the proxy", get(clientY+", "+clientX, unknown(2002)), 429)
	want("client Y claiming to be X in front of the proxy", get(clientX+", "+clientY, unknown(2003)), 401)
	want("garbage in front of client Y", get("not-an-address, "+clientY, unknown(2004)), 401)
	// Console session cookies and invitation links spend the same bucket, per forwarded client.
	page := func(xff, path, cookie string) response { return forwarded(t, "GET", base, path, xff, "", cookie) }
	want("client X's random session cookie", page(clientX, "/console/usage", "random-cookie-x"), 429)
	want("client Y's random session cookie", page(clientY, "/console/usage", "random-cookie-y"), 303)
	want("client X's random invitation link", page(clientX, "/console/invite/random-invite-x", ""), 429)
	if r := page(clientY, "/console/invite/random-invite-y", ""); r.status == 429 {
		t.Fatalf("client Y's random invitation link: 429: %s", r.body)
	}
	// The console's sign-in limit (ten a minute): the forms carry no token, so each is refused after counting.
	signIn := func(xff string) response { return forwarded(t, "POST", base, "/console/sign-in", xff, "", "") }
	for i := range 10 {
		want(fmt.Sprintf("client X's sign-in %d", i+1), signIn(clientX), 403)
	}
	if r := signIn(clientX); r.status != 429 || !strings.Contains(string(r.body), "Too many sign-in attempts") {
		t.Fatalf("client X's 11th sign-in: %d, want 429", r.status)
	}
	want("client Y's sign-in", signIn(clientY), 403)

	// No trusted proxy: whatever X-Forwarded-For says, 127.0.0.1 is the client. (One node at a time: see
	// startNode.)
	stopNode(t, behind)
	behind = nil
	direct := startNode(t, t.TempDir(), clk)
	t.Cleanup(func() { stopNode(t, direct) })
	spend("http://"+direct.APIAddr(), clientX)
	want("a spoofed other client, no proxy trusted",
		forwarded(t, "GET", "http://"+direct.APIAddr(), "/auth/api-key", clientY, unknown(3000), ""), 429)
}
