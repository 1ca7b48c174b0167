package console_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/internal/accounts"
	"filigrane/internal/admin"
	"filigrane/internal/clock"
	"filigrane/internal/node"
	"filigrane/internal/recordtest"
	"filigrane/persistence/diskspace"
)

// client talks to a node's console as a browser would, without following redirects.
type client struct {
	t       *testing.T
	base    string
	cookies map[string]string
	origin  string
}

type reply struct {
	status int
	header http.Header
	body   string
}

func (c *client) do(method, path string, form url.Values, hdr map[string]string) reply {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if c.origin != "" {
		req.Header.Set("Origin", c.origin)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	for k, v := range c.cookies {
		req.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, ck := range resp.Cookies() {
		if ck.MaxAge < 0 || ck.Value == "" {
			delete(c.cookies, ck.Name)
		} else {
			c.cookies[ck.Name] = ck.Value
		}
	}
	return reply{resp.StatusCode, resp.Header, string(b)}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signInForm loads the sign-in page and returns its CSRF token.
func (c *client) signInForm() string {
	c.t.Helper()
	r := c.do("GET", "/console/sign-in", nil, nil)
	m := csrfField.FindStringSubmatch(r.body)
	if r.status != 200 || m == nil {
		c.t.Fatalf("sign-in page: %d", r.status)
	}
	return m[1]
}

func (c *client) signIn(email, pw string) reply {
	c.t.Helper()
	tok := c.signInForm()
	return c.do("POST", "/console/sign-in", url.Values{"csrf": {tok}, "email": {email}, "password": {pw}}, nil)
}

// cheapHash keeps the many sign-ins of these tests fast; internal/accounts checks the default cost.
var cheapHash = accounts.Argon2{Time: 1, MemKiB: 256, Threads: 1}

func startNode(t *testing.T, clk clock.Clock, tweak func(*node.Config)) *node.Node {
	t.Helper()
	cfg := node.Config{DataDir: t.TempDir(), APIAddr: "127.0.0.1:0", UploadAddr: "127.0.0.1:0", NodeName: "console",
		Logger: zerolog.Nop(), Clock: clk, Bootstrap: true, SweepInterval: -1, ConsolePasswordCost: cheapHash}
	if tweak != nil {
		tweak(&cfg)
	}
	n, err := node.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = n.Close(ctx)
	})
	return n
}

func TestSessionsCookiesAndCSRF(t *testing.T) {
	clk := clock.NewManual(time.Now())
	n := startNode(t, clk, nil)
	dev := n.DevOrg
	c := &client{t: t, base: "http://" + n.APIAddr(), cookies: map[string]string{}}

	// Signed out: pages send to the sign-in page, console API calls answer 401 session_required.
	if r := c.do("GET", "/console/keys", nil, nil); r.status != 303 || r.header.Get("Location") != "/console/sign-in" {
		t.Fatalf("signed-out page: %d %s", r.status, r.header.Get("Location"))
	}
	if r := c.do("GET", "/console/api/assets", nil, nil); r.status != 401 || !strings.Contains(r.body, `"session_required"`) {
		t.Fatalf("signed-out API call: %d %s", r.status, r.body)
	}

	// The sign-in form needs its token (double submit): without it nothing is checked.
	c.signInForm()
	if r := c.do("POST", "/console/sign-in", url.Values{"email": {dev.ConsoleEmail}, "password": {dev.ConsolePassword}}, nil); r.status != 403 || !strings.Contains(r.body, "csrf_failed") {
		t.Fatalf("sign-in without token: %d", r.status)
	}
	if r := c.signIn(dev.ConsoleEmail, "not the password at all"); r.status != 401 || !strings.Contains(r.body, "Wrong email or password") {
		t.Fatalf("wrong password: %d", r.status)
	}

	// A session id held before sign-in is worthless after it (rotation), and the new cookie is HttpOnly,
	// SameSite=Lax, scoped to /console, not Secure on plain HTTP.
	c.cookies["filigrane_session"] = "planted-by-someone-else"
	tok := c.signInForm()
	req := url.Values{"csrf": {tok}, "email": {dev.ConsoleEmail}, "password": {dev.ConsolePassword}}
	r := c.do("POST", "/console/sign-in", req, nil)
	if r.status != 303 || r.header.Get("Location") != "/console/usage" {
		t.Fatalf("sign in: %d %s", r.status, r.body)
	}
	set := strings.Join(r.header.Values("Set-Cookie"), "\n")
	if !regexp.MustCompile(`filigrane_session=[A-Za-z0-9_-]{43}; path=/console; HttpOnly; SameSite=Lax`).MatchString(set) || strings.Contains(set, "secure") {
		t.Fatalf("session cookie: %s", set)
	}
	first := c.cookies["filigrane_session"]
	if first == "planted-by-someone-else" {
		t.Fatal("the planted session id was kept")
	}

	page := c.do("GET", "/console/keys", nil, nil)
	m := csrfField.FindStringSubmatch(page.body)
	if page.status != 200 || m == nil {
		t.Fatalf("keys page: %d", page.status)
	}
	token := m[1]
	// Pages: no inline script, and no string made HTML by the page's own script (Trusted Types); not cached.
	if csp := page.header.Get("Content-Security-Policy"); page.header.Get("Cache-Control") != "no-store" ||
		!strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "require-trusted-types-for 'script'") {
		t.Fatalf("page headers: %v", page.header)
	}
	key := url.Values{"name": {"ci"}, "scope": {"watermarks:embed"}, "expires": {"30d"}}

	// CSRF: no token, a wrong token, or another site's Origin are refused and create nothing.
	if r := c.do("POST", "/console/keys", key, nil); r.status != 403 || !strings.Contains(r.body, "csrf_failed") {
		t.Fatalf("form without token: %d", r.status)
	}
	wrong := "x"
	if token[0] == 'x' { // a token is random base64url: 1 in 64 starts with the replacement itself
		wrong = "y"
	}
	key.Set("csrf", wrong+token[1:])
	if r := c.do("POST", "/console/keys", key, nil); r.status != 403 {
		t.Fatalf("form with a wrong token: %d", r.status)
	}
	key.Set("csrf", token)
	c.origin = "http://evil.example"
	if r := c.do("POST", "/console/keys", key, nil); r.status != 403 {
		t.Fatalf("form from another origin: %d", r.status)
	}
	c.origin = ""
	if r := c.do("DELETE", "/console/api/assets/ast_00000000000000000000000000000000", nil, map[string]string{"X-CSRF-Token": "forged"}); r.status != 403 || !strings.Contains(r.body, `"csrf_failed"`) {
		t.Fatalf("API call with a forged token: %d %s", r.status, r.body)
	}
	if r := c.do("GET", "/console/keys", nil, nil); strings.Contains(r.body, ">ci<") {
		t.Fatal("a refused form created a key")
	}
	// A name with a right-to-left override would list as another key ("cigpj.exe"): refused, naming it
	// (internal/hiddenchar), nothing made.
	hidden := url.Values{"csrf": {token}, "name": {"ci\u202egpj.exe"}, "scope": {"watermarks:embed"}, "expires": {"30d"}}
	if r := c.do("POST", "/console/keys", hidden, nil); r.status != 422 || !strings.Contains(html.UnescapeString(r.body), "That holds a hidden character, U+202E,") ||
		strings.Contains(r.body, `value="fgk_`) || strings.Contains(r.body, "gpj.exe") {
		t.Fatalf("key named with a right-to-left override: %d", r.status)
	}
	r = c.do("POST", "/console/keys", key, nil)
	secret := regexp.MustCompile(`value="(fgk_[^"]+)"`).FindStringSubmatch(r.body)
	if r.status != 201 || secret == nil {
		t.Fatalf("create key: %d", r.status)
	}
	// The limit counts characters, not bytes: 100 Cyrillic letters (200 bytes) are a name.
	long := url.Values{"csrf": {token}, "name": {strings.Repeat("ж", 100)}, "scope": {"watermarks:embed"}, "expires": {"30d"}}
	if r := c.do("POST", "/console/keys", long, nil); r.status != 201 {
		t.Fatalf("key named with 100 Cyrillic letters: %d", r.status)
	}
	long.Set("name", strings.Repeat("ж", 101))
	if r := c.do("POST", "/console/keys", long, nil); r.status != 422 {
		t.Fatalf("key named with 101 letters: %d", r.status)
	}
	// A key named before that rule keeps its name, listed isolated so the override reverses nothing after it.
	keyID := regexp.MustCompile(`^fgk_([0-9a-f]+)_`).FindStringSubmatch(secret[1])
	recordtest.Rewrite(t, n.Store(), "apikey/"+keyID[1], func(k *actors.APIKey) { k.Name = "ci\u202egpj.exe" })
	if r := c.do("GET", "/console/keys", nil, nil); r.status != 200 || !strings.Contains(r.body, "<bdi>ci\u202egpj.exe</bdi>") {
		t.Fatalf("keys page with a key named before the rule: %d", r.status)
	}
	// The secret is on this answer only: no copy of it may be kept.
	if r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("the answer with a new key's secret: Cache-Control %q", r.header.Get("Cache-Control"))
	}
	// The API call with the right token runs the API's own route (and its answer: 404 for an unknown asset).
	if r := c.do("DELETE", "/console/api/assets/ast_00000000000000000000000000000000", nil, map[string]string{"X-CSRF-Token": token}); r.status != 404 || !strings.Contains(r.body, `"asset_not_found"`) {
		t.Fatalf("API call through the console: %d %s", r.status, r.body)
	}
	// API answers are data or files, never pages: shown as a document, one is sandboxed (an origin of its own).
	if r := c.do("GET", "/console/api/assets", nil, nil); r.status != 200 || !strings.Contains(r.header.Get("Content-Security-Policy"), "sandbox") ||
		r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("an API answer through the console: %d %v", r.status, r.header)
	}

	// Keys and sessions do not mix (spec 5.1).
	if r := c.do("GET", "/console/api/assets", nil, map[string]string{"X-API-Key": secret[1]}); r.status != 401 || !strings.Contains(r.body, `"session_required"`) {
		t.Fatalf("console call with a key: %d %s", r.status, r.body)
	}
	api := &client{t: t, base: c.base, cookies: map[string]string{"filigrane_session": first}}
	if r := api.do("GET", "/assets", nil, nil); r.status != 401 || !strings.Contains(r.body, "never a console session") {
		t.Fatalf("API route with a session cookie: %d %s", r.status, r.body)
	}

	// Idle expiry on the node's clock: used now and then the session lives; two idle hours end it.
	clk.Advance(90 * time.Minute)
	if r := c.do("GET", "/console/usage", nil, nil); r.status != 200 {
		t.Fatalf("after 90 minutes: %d", r.status)
	}
	clk.Advance(2 * time.Hour)
	if r := c.do("GET", "/console/usage", nil, nil); r.status != 303 {
		t.Fatalf("after 2 idle hours: %d", r.status)
	}
	if _, ok := c.cookies["filigrane_session"]; ok {
		t.Fatal("the expired session's cookie was not cleared")
	}
}

func TestSignInLimits(t *testing.T) {
	clk := clock.NewManual(time.Now())
	n := startNode(t, clk, func(cfg *node.Config) { cfg.ConsoleSecureCookies = true })
	c := &client{t: t, base: "http://" + n.APIAddr(), cookies: map[string]string{}}

	// Five wrong passwords lock the account: 429 with Retry-After, and the right password is refused too.
	for i := 1; i <= 4; i++ {
		if r := c.signIn(n.DevOrg.ConsoleEmail, "wrong password, sorry"); r.status != 401 {
			t.Fatalf("failure %d: %d", i, r.status)
		}
	}
	r := c.signIn(n.DevOrg.ConsoleEmail, "wrong password, sorry")
	if r.status != 429 || r.header.Get("Retry-After") != "900" || !strings.Contains(r.body, "locked") {
		t.Fatalf("fifth failure: %d %q", r.status, r.header.Get("Retry-After"))
	}
	if r := c.signIn(n.DevOrg.ConsoleEmail, n.DevOrg.ConsolePassword); r.status != 429 {
		t.Fatalf("right password while locked: %d", r.status)
	}
	clk.Advance(15 * time.Minute)
	r = c.signIn(n.DevOrg.ConsoleEmail, n.DevOrg.ConsolePassword)
	if r.status != 303 {
		t.Fatalf("after the lock: %d", r.status)
	}
	// SecureCookies (TLS terminated in front): the session cookie is Secure.
	if set := strings.Join(r.header.Values("Set-Cookie"), "\n"); !strings.Contains(set, "filigrane_session=") || !strings.Contains(set, "secure") {
		t.Fatalf("cookie without Secure: %s", set)
	}

	// Per address: ten attempts a minute (the sign-in above was the first of this minute), then 429 whatever
	// the account.
	for i := 2; i <= 10; i++ {
		if r := c.signIn("nobody@example.com", "wrong password, sorry"); r.status != 401 {
			t.Fatalf("attempt %d: %d", i, r.status)
		}
	}
	r = c.signIn("nobody@example.com", "wrong password, sorry")
	if r.status != 429 || !strings.Contains(r.body, "Too many sign-in attempts") {
		t.Fatalf("attempt 11: %d", r.status)
	}
	clk.Advance(time.Minute)
	if r := c.signIn("nobody@example.com", "wrong password, sorry"); r.status != 401 {
		t.Fatalf("next minute: %d", r.status)
	}
}

// TestMemberRole: a member (not owner or admin) signs in; the role limits them as it limits their keys.
func TestMemberRole(t *testing.T) {
	n := startNode(t, clock.NewManual(time.Now()), nil)
	adm := admin.Admin{Store: n.Store(), Clock: clock.System{}, Catalog: actors.DefaultCatalog(), PasswordCost: cheapHash}
	memberID, err := adm.AddMember(context.Background(), n.DevOrg.OrgID, "Mel", actors.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := adm.CreateUser(context.Background(), n.DevOrg.OrgID, memberID, "mel@example.com", "mel's long password"); err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, base: "http://" + n.APIAddr(), cookies: map[string]string{}}
	if r := c.signIn("mel@example.com", "mel's long password"); r.status != 303 {
		t.Fatalf("sign in: %d", r.status)
	}
	page := c.do("GET", "/console/keys", nil, nil)
	token := csrfField.FindStringSubmatch(page.body)[1]
	if strings.Contains(page.body, "/revoke") || strings.Contains(page.body, `href="/console/cluster"`) {
		t.Fatal("a member is offered to revoke the owner's key or to see the cluster")
	}
	devKey := regexp.MustCompile(`data-key-id="([0-9a-f]{16})"`).FindStringSubmatch(page.body)
	if devKey == nil {
		t.Fatal("no key listed")
	}
	if r := c.do("POST", "/console/keys/"+devKey[1]+"/revoke", url.Values{"csrf": {token}}, nil); r.status != 403 {
		t.Fatalf("member revokes the owner's key: %d", r.status)
	}
	if r := c.do("GET", "/console/cluster", nil, nil); r.status != 403 {
		t.Fatalf("member opens the cluster page: %d", r.status)
	}
	if r := c.do("DELETE", "/console/api/assets/ast_00000000000000000000000000000000", nil, map[string]string{"X-CSRF-Token": token}); r.status != 403 || !strings.Contains(r.body, `"role_forbidden"`) {
		t.Fatalf("member deletes an asset through the console: %d %s", r.status, r.body)
	}
	// A member removed from the organization is signed out at their next request.
	if err := adm.RemoveMember(context.Background(), n.DevOrg.OrgID, memberID); err != nil {
		t.Fatal(err)
	}
	if r := c.do("GET", "/console/usage", nil, nil); r.status != 303 {
		t.Fatalf("removed member: %d", r.status)
	}
}

// TestInvitation: an owner invites someone by a one-time link; they choose a password, become a member with
// the invited role and are signed in; the link works once.
func TestInvitation(t *testing.T) {
	n := startNode(t, clock.NewManual(time.Now()), nil)
	owner := &client{t: t, base: "http://" + n.APIAddr(), cookies: map[string]string{}}
	if r := owner.signIn(n.DevOrg.ConsoleEmail, n.DevOrg.ConsolePassword); r.status != 303 {
		t.Fatalf("sign in: %d", r.status)
	}
	page := owner.do("GET", "/console/members", nil, nil)
	token := csrfField.FindStringSubmatch(page.body)[1]
	r := owner.do("POST", "/console/members/invite", url.Values{"csrf": {token}, "email": {"Ada@Example.com"}, "role": {"admin"}}, nil)
	link := regexp.MustCompile(`value="http://[^/]+(/console/invite/[A-Za-z0-9_-]{43})"`).FindStringSubmatch(r.body)
	if r.status != 201 || link == nil {
		t.Fatalf("invite: %d", r.status)
	}
	if r := owner.do("POST", "/console/members/invite", url.Values{"csrf": {token}, "email": {n.DevOrg.ConsoleEmail}, "role": {"member"}}, nil); r.status != 409 {
		t.Fatalf("inviting an existing user: %d", r.status)
	}
	// An address with a zero-width space looks like Ada's and is not: refused, saying which character.
	if r := owner.do("POST", "/console/members/invite", url.Values{"csrf": {token}, "email": {"ada\u200b@example.com"}, "role": {"member"}}, nil); r.status != 422 ||
		!strings.Contains(html.UnescapeString(r.body), "That holds a hidden character, U+200B,") || strings.Contains(r.body, "/console/invite/") {
		t.Fatalf("invite with a zero-width space: %d", r.status)
	}

	ada := &client{t: t, base: owner.base, cookies: map[string]string{}}
	form := ada.do("GET", link[1], nil, nil)
	pre := csrfField.FindStringSubmatch(form.body)
	if form.status != 200 || pre == nil || !strings.Contains(form.body, "ada@example.com") || !strings.Contains(form.body, "<strong>admin</strong>") {
		t.Fatalf("invitation page: %d", form.status)
	}
	if r := ada.do("POST", link[1], url.Values{"csrf": {"forged"}, "password": {"ada's own password"}, "confirm": {"ada's own password"}}, nil); r.status != 403 {
		t.Fatalf("accept with a forged token: %d", r.status)
	}
	if r := ada.do("POST", link[1], url.Values{"csrf": {pre[1]}, "password": {"ada's own password"}, "confirm": {"something else"}}, nil); r.status != 422 {
		t.Fatalf("accept with mismatched passwords: %d", r.status)
	}
	pre = csrfField.FindStringSubmatch(ada.do("GET", link[1], nil, nil).body)
	// Ada accepts on a computer where someone else's session was left open: its cookie is replaced by Ada's
	// session, and the session it named ends on the server too (as at sign-in), not left to live on unseen.
	left := &client{t: t, base: owner.base, cookies: map[string]string{}}
	if r := left.signIn(n.DevOrg.ConsoleEmail, n.DevOrg.ConsolePassword); r.status != 303 {
		t.Fatalf("sign in: %d", r.status)
	}
	ada.cookies["filigrane_session"] = left.cookies["filigrane_session"]
	if r := ada.do("POST", link[1], url.Values{"csrf": {pre[1]}, "password": {"ada's own password"}, "confirm": {"ada's own password"}}, nil); r.status != 303 || ada.cookies["filigrane_session"] == "" || ada.cookies["filigrane_session"] == left.cookies["filigrane_session"] {
		t.Fatalf("accept: %d", r.status)
	}
	if r := left.do("GET", "/console/members", nil, nil); r.status != 303 {
		t.Fatalf("the session the browser held before accepting, afterwards: %d, want 303 to sign in", r.status)
	}
	if r := ada.do("GET", "/console/members", nil, nil); r.status != 200 || !strings.Contains(r.body, `<bdi>ada@example.com</bdi> · <a href="/console/orgs" id="current-org" title="Switch or create an organization"><bdi>Development</bdi></a> (admin)`) {
		t.Fatalf("the new admin's members page: %d", r.status)
	}
	// Admins invite admins and members, not owners.
	adaToken := csrfField.FindStringSubmatch(ada.do("GET", "/console/members", nil, nil).body)[1]
	if r := ada.do("POST", "/console/members/invite", url.Values{"csrf": {adaToken}, "email": {"eve@example.com"}, "role": {"owner"}}, nil); r.status != 422 {
		t.Fatalf("admin invites an owner: %d", r.status)
	}
	// The link worked once.
	other := &client{t: t, base: owner.base, cookies: map[string]string{}}
	if r := other.do("GET", link[1], nil, nil); r.status != 410 {
		t.Fatalf("second use of the link: %d", r.status)
	}
}

// TestInvitationLinkUsesPublicURL: behind a proxy (--public-url), the invitation link shown to the admin is on
// the public URL, not on the Host the node saw (a proxy that rewrites Host would give the internal address).
func TestInvitationLinkUsesPublicURL(t *testing.T) {
	n := startNode(t, clock.NewManual(time.Now()), func(c *node.Config) { c.PublicURL = "https://marks.example.com" })
	owner := &client{t: t, base: "http://" + n.APIAddr(), cookies: map[string]string{}}
	if r := owner.signIn(n.DevOrg.ConsoleEmail, n.DevOrg.ConsolePassword); r.status != 303 {
		t.Fatalf("sign in: %d", r.status)
	}
	token := csrfField.FindStringSubmatch(owner.do("GET", "/console/members", nil, nil).body)[1]
	r := owner.do("POST", "/console/members/invite", url.Values{"csrf": {token}, "email": {"ada@example.com"}, "role": {"member"}}, nil)
	if r.status != 201 || !regexp.MustCompile(`value="https://marks\.example\.com/console/invite/[A-Za-z0-9_-]{43}"`).MatchString(r.body) {
		t.Fatalf("invite behind a proxy: %d, want the link on the public URL in:\n%s", r.status, r.body)
	}
}

// apiStatus calls the API itself with a key (not the console) and returns the status and body.
func apiStatus(t *testing.T, n *node.Node, method, path, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+n.APIAddr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMemberRolesAndRemoval: an owner makes a member admin and removes them from the console; the change
// counts for the member's API key and console session at once. The last owner can neither be demoted nor
// leave; an admin cannot touch an owner.
func TestMemberRolesAndRemoval(t *testing.T) {
	n := startNode(t, clock.NewManual(time.Now()), nil)
	ctx := context.Background()
	adm := admin.Admin{Store: n.Store(), Clock: clock.System{}, Catalog: actors.DefaultCatalog(), PasswordCost: cheapHash}
	org := n.DevOrg.OrgID
	melID, err := adm.AddMember(ctx, org, "Mel", actors.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := adm.CreateUser(ctx, org, melID, "mel@example.com", "mel's long password"); err != nil {
		t.Fatal(err)
	}
	melKey, _, err := adm.CreateKey(ctx, actors.NewKeySpec{OrgID: org, MemberID: melID, Name: "mel", Scopes: actors.AllScopes()})
	if err != nil {
		t.Fatal(err)
	}
	// Deleting an asset needs owner or admin: a member's key is refused with role_forbidden, an admin's gets
	// as far as "no such asset".
	const deletePath = "/assets/ast_00000000000000000000000000000000"
	if st, body := apiStatus(t, n, "DELETE", deletePath, melKey); st != 403 || !strings.Contains(body, "role_forbidden") {
		t.Fatalf("member's key deletes: %d %s", st, body)
	}

	owner := &client{t: t, base: "http://" + n.APIAddr(), cookies: map[string]string{}}
	if r := owner.signIn(n.DevOrg.ConsoleEmail, n.DevOrg.ConsolePassword); r.status != 303 {
		t.Fatalf("sign in: %d", r.status)
	}
	page := owner.do("GET", "/console/members", nil, nil)
	tok := csrfField.FindStringSubmatch(page.body)[1]
	ownerID := n.DevOrg.MemberID
	if strings.Contains(page.body, `action="/console/members/`+ownerID+`/remove"`) || strings.Contains(page.body, `id="role-`+ownerID+`"`) {
		t.Fatal("the only owner is offered to leave or change their role")
	}
	if !strings.Contains(page.body, `id="role-`+melID+`"`) || !strings.Contains(page.body, `action="/console/members/`+melID+`/remove"`) {
		t.Fatal("the owner is not offered to change Mel's role or remove Mel")
	}
	if r := owner.do("POST", "/console/members/"+ownerID+"/role", url.Values{"csrf": {tok}, "role": {"admin"}}, nil); r.status != 409 || !strings.Contains(r.body, "keeps at least one owner") {
		t.Fatalf("the last owner demotes themselves: %d", r.status)
	}
	if r := owner.do("POST", "/console/members/"+ownerID+"/remove", url.Values{"csrf": {tok}}, nil); r.status != 409 {
		t.Fatalf("the last owner leaves: %d", r.status)
	}
	if r := owner.do("POST", "/console/members/"+melID+"/role", url.Values{"role": {"admin"}}, nil); r.status != 403 {
		t.Fatalf("role change without the CSRF token: %d", r.status)
	}
	if r := owner.do("POST", "/console/members/"+melID+"/role", url.Values{"csrf": {tok}, "role": {"root"}}, nil); r.status != 422 {
		t.Fatalf("unknown role: %d", r.status)
	}
	if r := owner.do("POST", "/console/members/mem_nobody/role", url.Values{"csrf": {tok}, "role": {"admin"}}, nil); r.status != 404 {
		t.Fatalf("unknown member: %d", r.status)
	}
	if r := owner.do("POST", "/console/members/"+melID+"/role", url.Values{"csrf": {tok}, "role": {"admin"}}, nil); r.status != 200 {
		t.Fatalf("make Mel admin: %d", r.status)
	}
	// At once, without waiting for the organization's actor to go idle: Mel's key acts as an admin.
	if st, body := apiStatus(t, n, "DELETE", deletePath, melKey); st != 404 || !strings.Contains(body, "asset_not_found") {
		t.Fatalf("admin's key deletes a missing asset: %d %s", st, body)
	}

	mel := &client{t: t, base: owner.base, cookies: map[string]string{}}
	if r := mel.signIn("mel@example.com", "mel's long password"); r.status != 303 {
		t.Fatalf("Mel signs in: %d", r.status)
	}
	melPage := mel.do("GET", "/console/members", nil, nil)
	melTok := csrfField.FindStringSubmatch(melPage.body)[1]
	if !strings.Contains(melPage.body, "(admin)") || strings.Contains(melPage.body, `id="role-`+ownerID+`"`) {
		t.Fatalf("Mel's members page as admin: %d", melPage.status)
	}
	if r := mel.do("POST", "/console/members/"+ownerID+"/role", url.Values{"csrf": {melTok}, "role": {"member"}}, nil); r.status != 403 {
		t.Fatalf("an admin demotes the owner: %d", r.status)
	}
	if r := mel.do("POST", "/console/members/"+ownerID+"/remove", url.Values{"csrf": {melTok}}, nil); r.status != 403 {
		t.Fatalf("an admin removes the owner: %d", r.status)
	}

	// Removed: Mel's key stops working and Mel's console session ends at its next request.
	if r := owner.do("POST", "/console/members/"+melID+"/remove", url.Values{"csrf": {tok}}, nil); r.status != 200 || strings.Contains(r.body, `data-member-id="`+melID+`"`) {
		t.Fatalf("remove Mel: %d", r.status)
	}
	if st, body := apiStatus(t, n, "DELETE", deletePath, melKey); st != 403 || strings.Contains(body, "asset_not_found") {
		t.Fatalf("a removed member's key: %d %s", st, body)
	}
	if r := mel.do("GET", "/console/usage", nil, nil); r.status != 303 || r.header.Get("Location") != "/console/sign-in" {
		t.Fatalf("removed member's session: %d", r.status)
	}
}

// TestCreateAndSwitchOrganization: a signed-in person creates an organization (owner, no credits), works in
// it, switches back; switching to someone else's organization is refused; a second owner can leave.
func TestCreateAndSwitchOrganization(t *testing.T) {
	n := startNode(t, clock.NewManual(time.Now()), nil)
	c := &client{t: t, base: "http://" + n.APIAddr(), cookies: map[string]string{}}
	if r := c.signIn(n.DevOrg.ConsoleEmail, n.DevOrg.ConsolePassword); r.status != 303 {
		t.Fatalf("sign in: %d", r.status)
	}
	page := c.do("GET", "/console/orgs", nil, nil)
	tok := csrfField.FindStringSubmatch(page.body)[1]
	if page.status != 200 || !strings.Contains(page.body, "Development") || !strings.Contains(page.body, `<span class="tag">current</span>`) {
		t.Fatalf("organizations page: %d", page.status)
	}
	if r := c.do("POST", "/console/orgs", url.Values{"name": {"Second"}}, nil); r.status != 403 {
		t.Fatalf("create without the CSRF token: %d", r.status)
	}
	if r := c.do("POST", "/console/orgs", url.Values{"csrf": {tok}, "name": {"  "}}, nil); r.status != 422 {
		t.Fatalf("blank name: %d", r.status)
	}
	// A right-to-left override would show "Second\u202eoidutS" as another name: refused, naming it, nothing made.
	if r := c.do("POST", "/console/orgs", url.Values{"csrf": {tok}, "name": {"Second\u202eoidutS"}}, nil); r.status != 422 ||
		!strings.Contains(html.UnescapeString(r.body), "That holds a hidden character, U+202E,") || strings.Contains(r.body, "oidutS") {
		t.Fatalf("name with a right-to-left override: %d", r.status)
	}
	if r := c.do("POST", "/console/orgs", url.Values{"csrf": {tok}, "name": {"Second Studio"}}, nil); r.status != 303 || r.header.Get("Location") != "/console/members" {
		t.Fatalf("create: %d %s", r.status, r.header.Get("Location"))
	}
	members := c.do("GET", "/console/members", nil, nil)
	if !strings.Contains(members.body, `id="current-org" title="Switch or create an organization"><bdi>Second Studio</bdi></a> (owner)`) ||
		!strings.Contains(members.body, n.DevOrg.ConsoleEmail) {
		t.Fatalf("members of the new organization: %d", members.status)
	}
	secondID := regexp.MustCompile(`data-org-id="(org_[0-9a-f]+)"><td><bdi>Second Studio`).FindStringSubmatch(c.do("GET", "/console/orgs", nil, nil).body)
	if secondID == nil {
		t.Fatal("the new organization is not listed")
	}
	// It starts without credits: the usage page shows a zero balance.
	if u := c.do("GET", "/console/usage", nil, nil); !regexp.MustCompile(`(?s)Balance.{0,80}>0<`).MatchString(u.body) {
		t.Fatalf("usage of the new organization: %d", u.status)
	}
	// Keys made now belong to the new organization.
	keys := c.do("GET", "/console/keys", nil, nil)
	if strings.Contains(keys.body, "data-key-id") {
		t.Fatal("the new organization lists the development organization's keys")
	}
	if r := c.do("POST", "/console/orgs/switch", url.Values{"csrf": {tok}, "org": {"org_0000000000000000"}}, nil); r.status != 404 {
		t.Fatalf("switch to a stranger's organization: %d", r.status)
	}
	if r := c.do("POST", "/console/orgs/switch", url.Values{"csrf": {tok}, "org": {n.DevOrg.OrgID}}, nil); r.status != 303 {
		t.Fatalf("switch back: %d", r.status)
	}
	if r := c.do("GET", "/console/keys", nil, nil); !strings.Contains(r.body, ">Development</bdi></a> (owner)") || !strings.Contains(r.body, "data-key-id") {
		t.Fatalf("after switching back: %d", r.status)
	}
	// A fresh sign-in starts in the first organization.
	other := &client{t: t, base: c.base, cookies: map[string]string{}}
	if r := other.signIn(n.DevOrg.ConsoleEmail, n.DevOrg.ConsolePassword); r.status != 303 {
		t.Fatal(r.status)
	}
	if r := other.do("GET", "/console/usage", nil, nil); !strings.Contains(r.body, ">Development</bdi></a>") {
		t.Fatalf("fresh session: %d", r.status)
	}
	// Leaving the development organization (after making a second owner there) moves the session to the
	// organization the person still belongs to.
	adm := admin.Admin{Store: n.Store(), Clock: clock.System{}, Catalog: actors.DefaultCatalog(), PasswordCost: cheapHash}
	if _, err := adm.AddMember(context.Background(), n.DevOrg.OrgID, "Other owner", actors.RoleOwner); err != nil {
		t.Fatal(err)
	}
	if r := c.do("POST", "/console/members/"+n.DevOrg.MemberID+"/remove", url.Values{"csrf": {tok}}, nil); r.status != 303 || r.header.Get("Location") != "/console/orgs" {
		t.Fatalf("leave: %d", r.status)
	}
	if r := c.do("GET", "/console/orgs", nil, nil); r.status != 200 || strings.Contains(r.body, ">Development<") || !strings.Contains(r.body, ">Second Studio</bdi></a> (owner)") {
		t.Fatalf("after leaving: %d", r.status)
	}
}

// TestInviteExistingAccount: a person who already has an account is invited into another organization. Ada,
// signed out, opens the link, signs in with her password and is a member of both organizations, working in the
// new one, where her new key acts with the invited role at once. Eve, signed in as herself, cannot use Ada's
// link, and joins with her own link by its button alone. A used link answers 410.
func TestInviteExistingAccount(t *testing.T) {
	n := startNode(t, clock.NewManual(time.Now()), nil)
	ctx := context.Background()
	adm := admin.Admin{Store: n.Store(), Clock: clock.System{}, Catalog: actors.DefaultCatalog(), PasswordCost: cheapHash}
	dev := n.DevOrg.OrgID
	for _, p := range []struct{ name, email, pw string }{{"Ada", "ada@example.com", "ada's long password"}, {"Eve", "eve@example.com", "eve's long password"}} {
		id, err := adm.AddMember(ctx, dev, p.name, actors.RoleMember)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := adm.CreateUser(ctx, dev, id, p.email, p.pw); err != nil {
			t.Fatal(err)
		}
	}

	// The owner creates Studio (the session switches to it) and invites Ada as admin, Eve as member.
	owner := &client{t: t, base: "http://" + n.APIAddr(), cookies: map[string]string{}}
	if r := owner.signIn(n.DevOrg.ConsoleEmail, n.DevOrg.ConsolePassword); r.status != 303 {
		t.Fatalf("sign in: %d", r.status)
	}
	tok := csrfField.FindStringSubmatch(owner.do("GET", "/console/orgs", nil, nil).body)[1]
	if r := owner.do("POST", "/console/orgs", url.Values{"csrf": {tok}, "name": {"Studio"}}, nil); r.status != 303 {
		t.Fatalf("create Studio: %d", r.status)
	}
	linkRE := regexp.MustCompile(`value="http://[^/]+(/console/invite/[A-Za-z0-9_-]{43})"`)
	invite := func(email, role string) string {
		t.Helper()
		r := owner.do("POST", "/console/members/invite", url.Values{"csrf": {tok}, "email": {email}, "role": {role}}, nil)
		link := linkRE.FindStringSubmatch(r.body)
		if r.status != 201 || link == nil {
			t.Fatalf("invite %s: %d", email, r.status)
		}
		return link[1]
	}
	adaLink, eveLink := invite("Ada@Example.com", "admin"), invite("eve@example.com", "member")
	// Studio's actor is running (its owner's key used) before Ada joins, so "at once" below needs the refresh.
	r := owner.do("POST", "/console/keys", url.Values{"csrf": {tok}, "name": {"owner"}, "scope": {"assets:read"}, "expires": {"30d"}}, nil)
	ownerKey := regexp.MustCompile(`value="(fgk_[^"]+)"`).FindStringSubmatch(r.body)
	if r.status != 201 || ownerKey == nil {
		t.Fatalf("the owner creates a key in Studio: %d", r.status)
	}
	if st, body := apiStatus(t, n, "GET", "/assets", ownerKey[1]); st != 200 {
		t.Fatalf("the owner's Studio key: %d %s", st, body)
	}
	if r := owner.do("POST", "/console/members/invite", url.Values{"csrf": {tok}, "email": {n.DevOrg.ConsoleEmail}, "role": {"member"}}, nil); r.status != 409 || !strings.Contains(r.body, "a member of the organization already") {
		t.Fatalf("inviting a member of Studio: %d", r.status)
	}

	// Eve, signed in as herself, cannot use Ada's link: neither the page nor a posted form (the link stays usable).
	eve := &client{t: t, base: owner.base, cookies: map[string]string{}}
	if r := eve.signIn("eve@example.com", "eve's long password"); r.status != 303 {
		t.Fatalf("Eve signs in: %d", r.status)
	}
	if r := eve.do("GET", adaLink, nil, nil); r.status != 403 || !strings.Contains(r.body, "signed in as \u2068eve@example.com\u2069") || !strings.Contains(r.body, "for \u2068ada@example.com\u2069") {
		t.Fatalf("Eve opens Ada's link: %d", r.status)
	}
	eve.cookies["filigrane_signin"] = "eve-double-submit-token"
	if r := eve.do("POST", adaLink, url.Values{"csrf": {"eve-double-submit-token"}, "password": {"eve's long password"}}, nil); r.status != 403 {
		t.Fatalf("Eve posts Ada's link: %d", r.status)
	}

	// Ada, signed out, is asked for her password (not a new one); a wrong one is refused.
	ada := &client{t: t, base: owner.base, cookies: map[string]string{}}
	page := ada.do("GET", adaLink, nil, nil)
	pre := csrfField.FindStringSubmatch(page.body)
	if page.status != 200 || pre == nil || !strings.Contains(page.body, "sign in with its password") || strings.Contains(page.body, `name="confirm"`) ||
		!strings.Contains(page.body, "<strong><bdi>Studio</bdi></strong> as <strong>admin</strong>") {
		t.Fatalf("Ada's invitation page: %d", page.status)
	}
	if r := ada.do("POST", adaLink, url.Values{"csrf": {pre[1]}, "password": {"not ada's password"}}, nil); r.status != 401 || ada.cookies["filigrane_session"] != "" {
		t.Fatalf("wrong password: %d", r.status)
	}
	pre = csrfField.FindStringSubmatch(ada.do("GET", adaLink, nil, nil).body)
	if r := ada.do("POST", adaLink, url.Values{"csrf": {pre[1]}, "password": {"ada's long password"}}, nil); r.status != 303 || r.header.Get("Location") != "/console/usage" || ada.cookies["filigrane_session"] == "" {
		t.Fatalf("Ada accepts: %d", r.status)
	}
	// Member of both, working in Studio as admin.
	orgs := ada.do("GET", "/console/orgs", nil, nil)
	if !strings.Contains(orgs.body, ">Studio</bdi></a> (admin)") || !strings.Contains(orgs.body, "<td><bdi>Development") || !strings.Contains(orgs.body, "<td><bdi>Studio") {
		t.Fatalf("Ada's organizations: %d", orgs.status)
	}
	// Her key of Studio acts as an admin at once: deleting a missing asset gets as far as "no such asset".
	adaTok := csrfField.FindStringSubmatch(ada.do("GET", "/console/keys", nil, nil).body)[1]
	r = ada.do("POST", "/console/keys", url.Values{"csrf": {adaTok}, "name": {"studio"}, "scope": {"assets:read", "assets:delete"}, "expires": {"30d"}}, nil)
	secret := regexp.MustCompile(`value="(fgk_[^"]+)"`).FindStringSubmatch(r.body)
	if r.status != 201 || secret == nil {
		t.Fatalf("Ada creates a key in Studio: %d", r.status)
	}
	if st, body := apiStatus(t, n, "DELETE", "/assets/ast_00000000000000000000000000000000", secret[1]); st != 404 || !strings.Contains(body, "asset_not_found") {
		t.Fatalf("Ada's Studio key: %d %s", st, body)
	}
	if r := owner.do("GET", "/console/members", nil, nil); !strings.Contains(r.body, "ada@example.com") {
		t.Fatal("Studio's members do not list Ada")
	}

	// The link worked once.
	if r := (&client{t: t, base: owner.base, cookies: map[string]string{}}).do("GET", adaLink, nil, nil); r.status != 410 {
		t.Fatalf("second use of Ada's link: %d", r.status)
	}
	ada.cookies["filigrane_signin"] = "ada-double-submit-token"
	if r := ada.do("POST", adaLink, url.Values{"csrf": {"ada-double-submit-token"}}, nil); r.status != 410 {
		t.Fatalf("Ada posts her used link: %d", r.status)
	}

	// Eve, signed in as herself, joins with her own link by its button; her session moves to Studio.
	page = eve.do("GET", eveLink, nil, nil)
	pre = csrfField.FindStringSubmatch(page.body)
	if page.status != 200 || pre == nil || !strings.Contains(page.body, "You are signed in with this email") || strings.Contains(page.body, `name="password"`) {
		t.Fatalf("Eve's invitation page: %d", page.status)
	}
	if r := eve.do("POST", eveLink, url.Values{"csrf": {pre[1]}}, nil); r.status != 303 {
		t.Fatalf("Eve accepts: %d", r.status)
	}
	if r := eve.do("GET", "/console/members", nil, nil); !strings.Contains(r.body, ">Studio</bdi></a> (member)") {
		t.Fatalf("Eve's members page: %d", r.status)
	}

	// At 20 organizations Eve cannot join a 21st: 409, and the link stays unused.
	eveTok := csrfField.FindStringSubmatch(eve.do("GET", "/console/orgs", nil, nil).body)[1]
	for i := 3; i <= accounts.MaxMemberships; i++ {
		if r := eve.do("POST", "/console/orgs", url.Values{"csrf": {eveTok}, "name": {fmt.Sprintf("Eve %d", i)}}, nil); r.status != 303 {
			t.Fatalf("Eve creates organization %d: %d", i, r.status)
		}
	}
	if r := owner.do("POST", "/console/orgs", url.Values{"csrf": {tok}, "name": {"Third"}}, nil); r.status != 303 {
		t.Fatalf("create Third: %d", r.status)
	}
	thirdLink := invite("eve@example.com", "member")
	pre = csrfField.FindStringSubmatch(eve.do("GET", thirdLink, nil, nil).body)
	if r := eve.do("POST", thirdLink, url.Values{"csrf": {pre[1]}}, nil); r.status != 409 || !strings.Contains(r.body, "20 organizations") {
		t.Fatalf("Eve joins a 21st organization: %d", r.status)
	}
	if r := eve.do("GET", thirdLink, nil, nil); r.status != 200 {
		t.Fatalf("the refused link afterwards: %d", r.status)
	}
	if r := owner.do("GET", "/console/members", nil, nil); strings.Contains(r.body, "eve@example.com") {
		t.Fatal("Third lists Eve")
	}
}

// TestClusterPageShowsLowDisk: the cluster page tags a node below its --min-free-disk reserve "low on disk"
// (its gossiped metadata, read every second), and drops the tag once space is freed.
func TestClusterPageShowsLowDisk(t *testing.T) {
	g := diskspace.New(t.TempDir(), 1)
	n := startNode(t, clock.NewManual(time.Now()), func(c *node.Config) { c.DiskGuard = g })
	dev := n.DevOrg
	c := &client{t: t, base: "http://" + n.APIAddr(), cookies: map[string]string{}}
	if r := c.signIn(dev.ConsoleEmail, dev.ConsolePassword); r.status != 303 {
		t.Fatalf("sign in: %d", r.status)
	}
	tagged := func(want bool) {
		t.Helper()
		timeout := time.After(10 * time.Second) // the node reads its disk every second
		for {
			changed := n.Cluster().MembersChanged()
			r := c.do("GET", "/console/cluster", nil, nil)
			if r.status != 200 {
				t.Fatalf("cluster page: %d", r.status)
			}
			if strings.Contains(r.body, `<span class="tag">low on disk</span>`) == want {
				return
			}
			select {
			case <-changed:
			case <-timeout:
				t.Fatalf("the cluster page never showed the node with low on disk %v:\n%s", want, r.body)
			}
		}
	}
	tagged(false)
	free, err := g.Free()
	if err != nil {
		t.Fatal(err)
	}
	g.SetReserve(2 * free)
	tagged(true)
	g.SetReserve(1)
	tagged(false)
}
