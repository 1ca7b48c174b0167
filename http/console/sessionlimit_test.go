package console_test

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"filigrane/internal/authlimit"
	"filigrane/internal/clock"
)

// TestRandomSessionCookiesCostBoundedStoreReads: anyone can send /console requests with random session
// cookies (or open random invitation links), and each used to cost the node a store read (an S3 GET in a
// cluster). Now the same cookie again
// costs nothing, distinct ones spend the client address's bucket of failed lookups (shared with API keys),
// and past it pages answer 429 and console API calls 429 rate_limited, with Retry-After, without a read and
// without clearing the cookie. A person signed in from the same address keeps working, and signing out still
// ends the session at once.
func TestRandomSessionCookiesCostBoundedStoreReads(t *testing.T) {
	clk := clock.NewManual(time.Now())
	n := startNode(t, clk, nil)
	base := "http://" + n.APIAddr()
	person := &client{t: t, base: base, cookies: map[string]string{}}
	if r := person.signIn(n.DevOrg.ConsoleEmail, n.DevOrg.ConsolePassword); r.status != 303 {
		t.Fatalf("sign in: %d", r.status)
	}
	metric := func(series string) int {
		t.Helper()
		m := (&client{t: t, base: base, cookies: map[string]string{}}).do("GET", "/metrics", nil, nil)
		for _, line := range strings.Split(m.body, "\n") {
			if v, ok := strings.CutPrefix(line, series+" "); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				return n
			}
		}
		return 0
	}
	reads := func() int {
		return metric(`filigrane_store_operations_total{backend="pebble",op="get",prefix="account",store="records"}`)
	}
	// page requests /console/usage with cookie; it must not clear a cookie it did not check.
	page := func(cookie string) reply {
		c := &client{t: t, base: base, cookies: map[string]string{"filigrane_session": cookie}}
		return c.do("GET", "/console/usage", nil, nil)
	}
	random := func(i int) string { return fmt.Sprintf("random-cookie-%04d", i) }
	invalid := func(what string, r reply) {
		t.Helper()
		if r.status != 303 || r.header.Get("Location") != "/console/sign-in" {
			t.Fatalf("%s: %d %s, want a redirect to the sign-in page", what, r.status, r.header.Get("Location"))
		}
	}
	limited := func(what string, r reply) {
		t.Helper()
		if r.status != 429 || r.header.Get("Retry-After") != strconv.Itoa(int(authlimit.DefaultEvery/time.Second)) ||
			strings.Contains(strings.Join(r.header.Values("Set-Cookie"), "\n"), "filigrane_session=") {
			t.Fatalf("%s: %d, Retry-After %q, Set-Cookie %q: want 429 with the wait for the next token, the cookie kept",
				what, r.status, r.header.Get("Retry-After"), r.header.Values("Set-Cookie"))
		}
	}

	before := reads()
	for i := range 3 {
		invalid(fmt.Sprintf("the same random cookie, try %d", i), page(random(0)))
	}
	if got := reads() - before; got != 1 {
		t.Fatalf("the same random cookie three times cost %d store reads, want 1", got)
	}
	for i := 1; i < authlimit.DefaultBurst; i++ {
		invalid(fmt.Sprintf("random cookie %d", i), page(random(i)))
	}
	if got := reads() - before; got != authlimit.DefaultBurst {
		t.Fatalf("%d distinct random cookies cost %d store reads", authlimit.DefaultBurst, got)
	}
	r := page(random(1000))
	limited("a page with a random cookie past the bucket", r)
	if !strings.Contains(r.body, "Too many requests with unknown sessions") {
		t.Fatalf("the page past the bucket says: %s", r.body)
	}
	api := (&client{t: t, base: base, cookies: map[string]string{"filigrane_session": random(1001)}}).do("GET", "/console/api/assets", nil, nil)
	limited("a console API call past the bucket", api)
	if !strings.Contains(api.body, `"rate_limited"`) {
		t.Fatalf("the console API call past the bucket: %s", api.body)
	}
	link := (&client{t: t, base: base, cookies: map[string]string{}}).do("GET", "/console/invite/"+random(1002), nil, nil)
	limited("a random invitation link past the bucket", link)
	invalid("the first random cookie, remembered", page(random(0)))
	if got := reads() - before; got != authlimit.DefaultBurst {
		t.Fatalf("store reads went from %d to %d past the bucket", authlimit.DefaultBurst, got)
	}

	// The person signed in from the same address works on: pages and console API calls.
	if r := person.do("GET", "/console/usage", nil, nil); r.status != 200 {
		t.Fatalf("the signed-in person's page: %d", r.status)
	}
	if r := person.do("GET", "/console/api/assets", nil, nil); r.status != 200 {
		t.Fatalf("the signed-in person's API call: %d %s", r.status, r.body)
	}

	// One token comes back per DefaultEvery; invitation links spend the same bucket.
	before = reads()
	clk.Advance(authlimit.DefaultEvery)
	if r := (&client{t: t, base: base, cookies: map[string]string{}}).do("GET", "/console/invite/"+random(2000), nil, nil); r.status != 410 {
		t.Fatalf("a random invitation link after a token came back: %d, want 410", r.status)
	}
	limited("a random cookie after it", page(random(2001)))
	if got := reads() - before; got != 1 {
		t.Fatalf("a token came back, and %d store reads were made with it", got)
	}

	// Signing out ends the session at once.
	m := csrfField.FindStringSubmatch(person.do("GET", "/console/account", nil, nil).body)
	if m == nil {
		t.Fatal("no CSRF token on the account page")
	}
	session := person.cookies["filigrane_session"]
	if r := person.do("POST", "/console/sign-out", url.Values{"csrf": {m[1]}}, nil); r.status != 303 {
		t.Fatalf("sign out: %d", r.status)
	}
	invalid("the signed-out session", page(session))

	if got := metric(`filigrane_console_session_refused_total{reason="address_limited"}`); got != 4 {
		t.Fatalf("console refusals by address counted %d, want 4", got)
	}
	if got := metric(`filigrane_console_session_refused_total{reason="invalid_session"}`); got != authlimit.DefaultBurst+4 {
		t.Fatalf("invalid sessions counted %d, want %d", got, authlimit.DefaultBurst+4)
	}
}
