// Package console is the web console the node serves under /console: sign-in, usage and credits, API keys,
// assets, marking a file and checking one by drag and drop, jobs, batches, webhooks, storage destinations, the
// GPU, the cluster, members and organizations. Pages are rendered on the server with
// html/template; a small embedded script (static/console.js) calls the API's own routes under
// /console/api/... with the session instead of an API key. Nothing is fetched from elsewhere (no CDN), so the
// console works offline. docs/console.md explains the choices.
//
// It owns the session cookie, CSRF tokens, the per-address sign-in limit, the pages, and the in-memory cache of
// asset thumbnails. It must not implement API behaviour: /console/api/<path> runs the API's route for <path>
// (through Config.API), with the signed-in member in place of a key, so the console and the SDKs see the same
// rules, limits and errors. It stores nothing of its own: accounts and sessions belong to internal/accounts;
// organization records (created, members invited, given roles, removed from the console) are written through
// actors.Orgs under internal/accounts' rules, and the organization's actor is told to read them again.
package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/internal/accounts"
	"filigrane/internal/authlimit"
	"filigrane/internal/clock"
	"filigrane/internal/problem"
	"filigrane/internal/reqlog"
	"filigrane/persistence"
)

// Prefix is where the console is served.
const Prefix = "/console"

// Cookie names. The session cookie holds the session secret; the pre-session cookie holds the CSRF token of
// the sign-in form (double submit), before any session exists.
const (
	sessionCookie    = "filigrane_session"
	preSessionCookie = "filigrane_signin"
	csrfHeader       = "X-CSRF-Token"
	csrfField        = "csrf"
)

// SessionCookie is the session cookie's name: the API answers a request that carries it instead of a key
// with a clear 401 (spec 5.1: API endpoints take keys, never sessions).
const SessionCookie = sessionCookie

// Member is the signed-in person as the API's routes see them: an organization member.
type Member struct {
	UserID, OrgID, MemberID string
}

// Config is what the console needs.
type Config struct {
	Accounts *accounts.Accounts
	Orgs     actors.Orgs
	OrgCalls actors.OrgClient
	Keys     actors.Keys
	Catalog  actors.Catalog
	Clock    clock.Clock
	// Logger is the base of the node's lines; a page logs through Console.log, whose lines name the request.
	Logger zerolog.Logger
	// Context returns the context of ctx's blocking calls (the server's request context); it carries the
	// request's logger (reqlog).
	Context func(ctx *fasthttp.RequestCtx, timeout time.Duration) (context.Context, context.CancelFunc)
	// API runs the API route of path (e.g. "/assets") for m and answers ctx as the API would.
	API func(ctx *fasthttp.RequestCtx, m Member, path string)
	// Problem answers with a problem body of the API's one error table.
	Problem func(ctx *fasthttp.RequestCtx, code problem.Code, detail string)
	// Thumbnail finds image asset assetID of m's organization and returns a tag of its file's content and a
	// function that renders its thumbnail (a PNG of at most ThumbnailSize pixels a side, decoded within the
	// node's decode budget). ErrNoThumbnail: no such image; ErrThumbnailBusy: no decode memory came free in
	// time. Nil: the assets page shows no previews.
	Thumbnail func(ctx context.Context, m Member, assetID string) (tag string, render func(context.Context) ([]byte, error), err error)
	// Cluster lists the nodes this node sees (the cluster page, owners and admins only); nil: the page says
	// there is no cluster information.
	Cluster func() []ClusterNode
	// SecureCookies marks cookies Secure even when this listener is plain HTTP (behind a TLS-terminating
	// proxy). Under TLS they are Secure anyway.
	SecureCookies bool
	// PublicURL is the base URL people reach the node at behind a proxy (the API's --public-url, no trailing
	// slash): invitation links are built on it. Empty: on the request's scheme and Host, which behind a proxy
	// that rewrites Host would name the node's internal address.
	PublicURL string
	// SignInsPerMinute bounds sign-in attempts per client address (default 10); past it: 429.
	SignInsPerMinute int
	// NewOrgPlan is the plan of organizations created from the console (default "launch": no credits until
	// the operator grants some, so creating organizations cannot mint free credits).
	NewOrgPlan string
	// Timeout bounds each request's storage and actor calls (default 10 s).
	Timeout time.Duration
	// CountRefusal, when set, counts a request refused for its session cookie (or, past the bounds, its
	// invitation link), by one of RefusalReasons.
	CountRefusal func(reason string)
	// ClientIP is the address a request's per-address limits (sign-ins, unknown session cookies and
	// invitation tokens) count against: behind a trusted reverse proxy, the client it forwards for. Nil: the
	// connection's address.
	ClientIP func(ctx *fasthttp.RequestCtx) net.IP
}

// ClusterNode is one node as the cluster page shows it.
type ClusterNode struct {
	Name     string
	Roles    []string
	Free     map[string]int
	Capacity int
	GPUs     int
	Addr     string
	Self     bool
	// LowDisk: the node is below its --min-free-disk reserve (placement passes it over while others have room).
	LowDisk bool
}

// Console serves /console.
type Console struct {
	cfg     Config
	pages   map[string]*template.Template
	static  fs.FS
	limiter *limiter
	thumbs  *thumbs
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New builds the console; it fails only on a broken template (a build defect).
func New(cfg Config) (*Console, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.NewOrgPlan == "" {
		cfg.NewOrgPlan = "launch"
	}
	if cfg.ClientIP == nil {
		cfg.ClientIP = (*fasthttp.RequestCtx).RemoteIP
	}
	if cfg.SignInsPerMinute <= 0 {
		cfg.SignInsPerMinute = 10
	}
	c := &Console{cfg: cfg, pages: map[string]*template.Template{},
		limiter: newLimiter(cfg.SignInsPerMinute, time.Minute, cfg.Clock), thumbs: newThumbs()}
	funcs := template.FuncMap{"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("console template %s: %w", n, err)
		}
		c.pages[base] = t
	}
	c.static, err = fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Handles reports whether path belongs to the console.
func Handles(path string) bool { return path == Prefix || strings.HasPrefix(path, Prefix+"/") }

// view is what a page template gets.
type view struct {
	Title   string
	Nav     string
	CSRF    string
	User    *accounts.User
	Role    actors.Role
	OrgName string
	Error   string
	Notice  string
	Data    any
}

// request is one signed-in request.
type request struct {
	ctx     *fasthttp.RequestCtx
	c       context.Context
	session *accounts.Session
	user    *accounts.User
	// orgID and memberID are the membership the session works in; org is its record.
	orgID, memberID string
	org             *actors.OrgState
	role            actors.Role
}

func (r *request) admin() bool { return r.role == actors.RoleOwner || r.role == actors.RoleAdmin }

func (r *request) member() Member {
	return Member{UserID: r.user.ID, OrgID: r.orgID, MemberID: r.memberID}
}

// pageCSP is the content security policy of the console's pages: scripts, styles and images only from the node
// itself, so no inline script can run even if a value ever escaped its template; and Trusted Types required, so
// the page's own script cannot insert a string as HTML or script either (it builds elements and sets
// textContent, which needs none).
const pageCSP = "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; script-src 'self'; object-src 'none'; " +
	"base-uri 'none'; frame-ancestors 'none'; form-action 'self'; require-trusted-types-for 'script'; trusted-types 'none'"

// apiCSP is the policy of /console/api/... answers: data for the pages' script and files to download, never
// pages. Should a browser show one as a document (a link to a result followed, a file whose type it renders),
// the sandbox gives it an origin of its own, where it can run no script and act with no session.
const apiCSP = "default-src 'none'; sandbox; frame-ancestors 'none'"

// Serve answers a request under /console.
func (c *Console) Serve(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	// A page opened from another site (a link, a popup) gets no handle on the console's window, nor it on theirs.
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if ctx.IsTLS() {
		// The node serves TLS itself: a browser that has been here keeps to https for two years, so a later
		// plain-http link (or a network that strips TLS) cannot carry the session cookie or the password.
		h.Set("Strict-Transport-Security", "max-age=63072000")
	}
	path := string(ctx.Path())
	rest := strings.TrimPrefix(path, Prefix)
	if strings.HasPrefix(rest, "/api/") {
		h.Set("Content-Security-Policy", apiCSP)
	} else {
		h.Set("Content-Security-Policy", pageCSP)
	}
	// Session endpoints refuse API keys (spec 5.1): a key is a machine credential, never a console login.
	if len(ctx.Request.Header.Peek("X-API-Key")) > 0 {
		c.cfg.Problem(ctx, problem.SessionRequired, "the console takes a signed-in session, never an API key; call the API's own routes with keys")
		return
	}
	method := string(ctx.Method())
	if strings.HasPrefix(rest, "/static/") {
		c.serveStatic(ctx, strings.TrimPrefix(rest, "/static/"))
		return
	}
	h.Set("Cache-Control", "no-store")
	switch rest {
	case "/sign-in":
		switch method {
		case "GET", "HEAD":
			c.signInPage(ctx, "", 200)
		case "POST":
			c.signIn(ctx)
		default:
			c.methodNotAllowed(ctx, "GET, POST")
		}
		return
	}
	if token, ok := strings.CutPrefix(rest, "/invite/"); ok && !strings.Contains(token, "/") {
		c.inviteRoute(ctx, token)
		return
	}
	c2, cancel := c.cfg.Context(ctx, c.cfg.Timeout)
	defer cancel()
	r, ok := c.authenticate(ctx, c2, strings.HasPrefix(rest, "/api/"))
	if !ok {
		return
	}
	if method != "GET" && method != "HEAD" && !c.checkCSRF(ctx, r.session.CSRF, rest) {
		return
	}
	if api, ok := strings.CutPrefix(rest, "/api"); ok && strings.HasPrefix(api, "/") {
		c.cfg.API(ctx, r.member(), api)
		return
	}
	c.route(r, method, rest)
}

func (c *Console) route(r *request, method, rest string) {
	get := method == "GET" || method == "HEAD"
	switch {
	case rest == "" || rest == "/":
		redirect(r.ctx, Prefix+"/usage")
	case rest == "/usage" && get:
		c.usagePage(r)
	case rest == "/keys" && get:
		c.keysPage(r, "", 200)
	case rest == "/keys" && method == "POST":
		c.createKey(r)
	case strings.HasPrefix(rest, "/keys/") && strings.HasSuffix(rest, "/revoke") && method == "POST":
		c.revokeKey(r, strings.TrimSuffix(strings.TrimPrefix(rest, "/keys/"), "/revoke"))
	case rest == "/assets" && get:
		c.render(r, "assets", 200, view{Title: "Assets", Nav: "assets"})
	case strings.HasPrefix(rest, "/thumbnails/") && get:
		c.thumbnail(r, strings.TrimPrefix(rest, "/thumbnails/"))
	case rest == "/mark" && get:
		c.render(r, "mark", 200, view{Title: "Mark a file", Nav: "mark", Data: markData(r.org.Name)})
	case rest == "/check" && get:
		c.render(r, "check", 200, view{Title: "Check a file", Nav: "check"})
	case rest == "/jobs" && get:
		c.jobsPage(r)
	case rest == "/batches" && get:
		c.render(r, "batches", 200, view{Title: "Batches", Nav: "batches"})
	case rest == "/webhooks" && get:
		c.render(r, "webhooks", 200, view{Title: "Webhooks", Nav: "webhooks"})
	case rest == "/storage" && get:
		c.render(r, "storage", 200, view{Title: "Storage destinations", Nav: "storage"})
	case rest == "/gpu" && get:
		c.render(r, "gpu", 200, view{Title: "GPU", Nav: "gpu"})
	case rest == "/cluster" && get:
		c.clusterPage(r)
	case rest == "/members" && get:
		c.membersPage(r, "", 200, "")
	case rest == "/members/invite" && method == "POST":
		c.invite(r)
	case strings.HasPrefix(rest, "/members/") && strings.HasSuffix(rest, "/role") && method == "POST":
		c.changeRole(r, strings.TrimSuffix(strings.TrimPrefix(rest, "/members/"), "/role"))
	case strings.HasPrefix(rest, "/members/") && strings.HasSuffix(rest, "/remove") && method == "POST":
		c.removeMember(r, strings.TrimSuffix(strings.TrimPrefix(rest, "/members/"), "/remove"))
	case rest == "/orgs" && get:
		c.orgsPage(r, "", 200)
	case rest == "/orgs" && method == "POST":
		c.createOrg(r)
	case rest == "/orgs/switch" && method == "POST":
		c.switchOrg(r)
	case rest == "/account" && get:
		c.render(r, "account", 200, view{Title: "Account", Nav: "account"})
	case rest == "/account/password" && method == "POST":
		c.changePassword(r)
	case rest == "/sign-out" && method == "POST":
		c.signOut(r)
	default:
		c.errorPage(r.ctx, 404, "There is no such page.")
	}
}

// authenticate finds the request's session. Without one, pages redirect to the sign-in page and API calls
// answer 401 session_required. A cookie this node knows nothing of is looked up within the node's bounds on
// unknown credentials (accounts.Accounts.Limit): past them it answers 429 or 503 with Retry-After and keeps
// the cookie, which may belong to a live session.
func (c *Console) authenticate(ctx *fasthttp.RequestCtx, c2 context.Context, api bool) (*request, bool) {
	secret := string(ctx.Request.Header.Cookie(sessionCookie))
	s, u, err := c.cfg.Accounts.SessionFrom(c2, secret, c.cfg.ClientIP(ctx))
	if err == nil {
		var r *request
		r, err = c.activeMembership(ctx, c2, secret, s, u)
		if err == nil {
			return r, true
		}
	}
	var refused *authlimit.Refusal
	if errors.As(err, &refused) {
		c.refuseLookup(ctx, refused, api)
		return nil, false
	}
	if !errors.Is(err, accounts.ErrNoSession) {
		c.count(RefusedStoreError)
		c.log(ctx).Error().Err(err).Msg("console: session check failed")
		if api {
			ctx.Response.Header.Set("Retry-After", "2")
			c.cfg.Problem(ctx, problem.Unavailable, "the session could not be checked; retry shortly")
		} else {
			c.errorPage(ctx, 503, "The session could not be checked. Try again in a moment.")
		}
		return nil, false
	}
	if secret != "" {
		c.count(RefusedInvalidSession)
		c.clearCookie(ctx, sessionCookie)
	}
	if api {
		c.cfg.Problem(ctx, problem.SessionRequired, "sign in to the console first; the session is missing or expired")
		return nil, false
	}
	redirect(ctx, Prefix+"/sign-in")
	return nil, false
}

// refuseLookup answers a session lookup the node's bounds refused, with Retry-After: 429 when the client's
// address has used up its failed lookups (rate_limited for API calls, a page for pages), 503 when too many
// lookups are under way. Unlike an invalid session it neither clears the cookie nor sends to the sign-in
// page: nothing was checked. Signing in again works at once (a new session is known to this node).
func (c *Console) refuseLookup(ctx *fasthttp.RequestCtx, refused *authlimit.Refusal, api bool) {
	secs := max(int((refused.RetryAfter+time.Second-1)/time.Second), 1)
	ctx.Response.Header.Set("Retry-After", strconv.Itoa(secs))
	if refused.Reason == authlimit.AddressSpent {
		c.count(RefusedAddressLimited)
		if api {
			c.cfg.Problem(ctx, problem.RateLimited, fmt.Sprintf(
				"too many requests with unknown console sessions from your address; retry in %d s (a session this node has seen is not limited)", secs))
			return
		}
		c.errorPage(ctx, 429, fmt.Sprintf(
			"Too many requests with unknown sessions or invitation links came from your address. Try again in %d seconds, or sign in again.", secs))
		return
	}
	c.count(RefusedLookupsBusy)
	if api {
		c.cfg.Problem(ctx, problem.Unavailable, "too many console sessions are being checked right now; retry shortly")
		return
	}
	c.errorPage(ctx, 503, "Too many sessions are being checked right now. Try again in a moment.")
}

// Reasons of Config.CountRefusal (address_limited and lookups_busy count invitation links too): a fixed set,
// so a metric labelled with them stays bounded.
const (
	RefusedInvalidSession = "invalid_session" // a cookie without a live session (sign-in page or 401)
	RefusedAddressLimited = "address_limited" // 429: the address's failed lookups are used up
	RefusedLookupsBusy    = "lookups_busy"    // 503: too many lookups of unknown credentials under way
	RefusedStoreError     = "store_error"     // 503: the store did not answer
)

// RefusalReasons lists the reasons Config.CountRefusal is called with.
func RefusalReasons() []string {
	return []string{RefusedInvalidSession, RefusedAddressLimited, RefusedLookupsBusy, RefusedStoreError}
}

func (c *Console) count(reason string) {
	if c.cfg.CountRefusal != nil {
		c.cfg.CountRefusal(reason)
	}
}

// activeMembership finds the organization the session works in. When the member was removed from it (or it
// is gone), the session moves to the user's first organization that still counts them; with none left it
// ends (ErrNoSession): a person removed everywhere signs in no more.
func (c *Console) activeMembership(ctx *fasthttp.RequestCtx, c2 context.Context, secret string, s *accounts.Session, u *accounts.User) (*request, error) {
	try := func(m accounts.Membership) (*request, error) {
		org, _, err := c.cfg.Orgs.Load(c2, m.OrgID)
		if errors.Is(err, persistence.ErrNotFound) {
			return nil, accounts.ErrNoSession
		}
		if err != nil {
			return nil, err
		}
		mem, ok := org.Member(m.MemberID)
		if !ok || mem.RemovedAt != nil {
			return nil, accounts.ErrNoSession
		}
		return &request{ctx: ctx, c: c2, session: s, user: u, orgID: m.OrgID, memberID: m.MemberID, org: org, role: mem.Role}, nil
	}
	cur := s.Active(u)
	r, err := try(cur)
	if !errors.Is(err, accounts.ErrNoSession) {
		return r, err
	}
	for _, m := range u.All() {
		if m.OrgID == cur.OrgID {
			continue
		}
		r, err := try(m)
		if errors.Is(err, accounts.ErrNoSession) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if r.session, err = c.cfg.Accounts.SwitchOrg(c2, secret, m.OrgID); err != nil {
			return nil, err
		}
		return r, nil
	}
	return nil, accounts.ErrNoSession
}

// checkCSRF refuses a state-changing request whose token does not match the session's, or that comes from
// another site (Origin). Forms send the token as a field, scripts as the X-CSRF-Token header.
func (c *Console) checkCSRF(ctx *fasthttp.RequestCtx, want, rest string) bool {
	if !c.sameOrigin(ctx) {
		c.refuseCSRF(ctx, rest, "the request came from another site")
		return false
	}
	got := string(ctx.Request.Header.Peek(csrfHeader))
	if got == "" && !strings.HasPrefix(rest, "/api/") {
		form, ok := c.form(ctx)
		if !ok {
			return false
		}
		got = form.Get(csrfField)
	}
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		c.refuseCSRF(ctx, rest, "the form's security token is missing or wrong; reload the page and try again")
		return false
	}
	return true
}

func (c *Console) refuseCSRF(ctx *fasthttp.RequestCtx, rest, why string) {
	ctx.SetConnectionClose() // the body may be unread
	if strings.HasPrefix(rest, "/api/") {
		c.cfg.Problem(ctx, problem.CSRFFailed, why)
		return
	}
	c.errorPage(ctx, 403, "Refused: "+why+" (csrf_failed).")
}

// sameOrigin checks the Origin header when the browser sent one: it must name this host.
func (c *Console) sameOrigin(ctx *fasthttp.RequestCtx) bool {
	origin := string(ctx.Request.Header.Peek("Origin"))
	if origin == "" {
		return true // older browsers send none on same-origin requests; the token still decides
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == string(ctx.Host())
}

// maxFormBytes bounds a console form body: the largest is the key form.
const maxFormBytes = 16 << 10

// form reads and parses the request's urlencoded form once (cached on the request); false means it answered.
func (c *Console) form(ctx *fasthttp.RequestCtx) (url.Values, bool) {
	if v, ok := ctx.UserValue("console.form").(url.Values); ok {
		return v, true
	}
	if !strings.HasPrefix(string(ctx.Request.Header.ContentType()), "application/x-www-form-urlencoded") {
		ctx.SetConnectionClose()
		c.errorPage(ctx, 415, "The form was not sent as a form.")
		return nil, false
	}
	if ctx.Request.Header.ContentLength() > maxFormBytes {
		ctx.SetConnectionClose()
		c.errorPage(ctx, 413, "The form is too large.")
		return nil, false
	}
	var r io.Reader = ctx.RequestBodyStream()
	if r == nil {
		r = bytes.NewReader(ctx.Request.Body())
	}
	body, err := io.ReadAll(io.LimitReader(r, maxFormBytes+1))
	if err != nil || len(body) > maxFormBytes {
		ctx.SetConnectionClose()
		c.errorPage(ctx, 413, "The form is too large.")
		return nil, false
	}
	v, err := url.ParseQuery(string(body))
	if err != nil {
		c.errorPage(ctx, 400, "The form could not be read.")
		return nil, false
	}
	ctx.SetUserValue("console.form", v)
	return v, true
}

func redirect(ctx *fasthttp.RequestCtx, to string) {
	ctx.Response.Header.Set("Location", to)
	ctx.SetStatusCode(303)
}

func (c *Console) methodNotAllowed(ctx *fasthttp.RequestCtx, allow string) {
	ctx.Response.Header.Set("Allow", allow)
	c.errorPage(ctx, 405, "That method is not allowed here.")
}

func (c *Console) secure(ctx *fasthttp.RequestCtx) bool { return c.cfg.SecureCookies || ctx.IsTLS() }

// setCookie sets an HttpOnly, SameSite=Lax cookie for the console's path (Secure under TLS). Lax, not
// Strict: a person following a link to the console from elsewhere stays signed in; state-changing requests
// need the CSRF token anyway.
func (c *Console) setCookie(ctx *fasthttp.RequestCtx, name, value string, maxAge time.Duration) {
	var ck fasthttp.Cookie
	ck.SetKey(name)
	ck.SetValue(value)
	ck.SetPath(Prefix)
	ck.SetHTTPOnly(true)
	ck.SetSecure(c.secure(ctx))
	ck.SetSameSite(fasthttp.CookieSameSiteLaxMode)
	if maxAge > 0 {
		ck.SetMaxAge(int(maxAge / time.Second))
	}
	ctx.Response.Header.SetCookie(&ck)
}

func (c *Console) clearCookie(ctx *fasthttp.RequestCtx, name string) {
	var ck fasthttp.Cookie
	ck.SetKey(name)
	ck.SetPath(Prefix)
	ck.SetHTTPOnly(true)
	ck.SetSecure(c.secure(ctx))
	ck.SetSameSite(fasthttp.CookieSameSiteLaxMode)
	ck.SetExpire(fasthttp.CookieExpireDelete)
	ctx.Response.Header.SetCookie(&ck)
}

// markData is the mark form's data to start from: the organization's name as its owner, encoded as JSON (a name
// with a quote or a backslash pasted into a JSON template would make invalid data, or add members of its own).
// The template escapes it for HTML, so it is not escaped for HTML here: "<" stays "<" for the person reading it.
func markData(orgName string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]string{"owner": orgName}); err != nil {
		return "{}"
	}
	return strings.TrimSpace(b.String())
}

// isolate marks s, a value someone chose (a name, an email), as a bidirectional isolate (U+2068 … U+2069) for
// the places where it is part of plain text and no <bdi> element can hold it: a page's title, a sentence of an
// error. A right-to-left override inside s then ends with s instead of reversing the words after it.
func isolate(s string) string { return "\u2068" + s + "\u2069" }

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func (c *Console) render(r *request, page string, status int, v view) {
	v.CSRF = r.session.CSRF
	v.User = r.user
	v.Role = r.role
	v.OrgName = r.org.Name
	c.renderPage(r.ctx, page, status, v)
}

func (c *Console) renderPage(ctx *fasthttp.RequestCtx, page string, status int, v view) {
	t, ok := c.pages[page]
	if !ok {
		c.log(ctx).Error().Str("page", page).Msg("console: no such template")
		ctx.SetStatusCode(500)
		return
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, v); err != nil {
		c.log(ctx).Error().Err(err).Str("page", page).Msg("console: render failed")
		ctx.SetStatusCode(500)
		ctx.SetContentType("text/plain; charset=utf-8")
		ctx.SetBodyString("the page could not be rendered")
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.SetBody(buf.Bytes())
}

func (c *Console) errorPage(ctx *fasthttp.RequestCtx, status int, msg string) {
	c.renderPage(ctx, "error", status, view{Title: fmt.Sprintf("Error %d", status), Error: msg})
}

func (c *Console) serveStatic(ctx *fasthttp.RequestCtx, name string) {
	if strings.Contains(name, "/") || strings.HasPrefix(name, ".") {
		c.errorPage(ctx, 404, "There is no such file.")
		return
	}
	b, err := fs.ReadFile(c.static, name)
	if err != nil {
		c.errorPage(ctx, 404, "There is no such file.")
		return
	}
	switch {
	case strings.HasSuffix(name, ".css"):
		ctx.SetContentType("text/css; charset=utf-8")
	case strings.HasSuffix(name, ".js"):
		ctx.SetContentType("text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".svg"):
		ctx.SetContentType("image/svg+xml")
	default:
		ctx.SetContentType("application/octet-stream")
	}
	ctx.Response.Header.Set("Cache-Control", "public, max-age=300")
	ctx.SetBody(b)
}

// limiter counts attempts per client address in fixed windows. It bounds its memory by starting over when it
// tracks too many addresses (an attacker with that many addresses meets the per-account lockout instead).
type limiter struct {
	mu     sync.Mutex
	max    int
	window time.Duration
	clk    clock.Clock
	seen   map[string]*window
}

type window struct {
	start time.Time
	n     int
}

const maxTrackedAddrs = 100_000

func newLimiter(max int, w time.Duration, clk clock.Clock) *limiter {
	return &limiter{max: max, window: w, clk: clk, seen: map[string]*window{}}
}

// allow counts one attempt from addr and reports whether it is within the limit, and when the window resets.
func (l *limiter) allow(addr string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clk.Now()
	w, ok := l.seen[addr]
	if !ok || now.Sub(w.start) >= l.window || now.Before(w.start) {
		if len(l.seen) >= maxTrackedAddrs {
			l.seen = map[string]*window{}
		}
		w = &window{start: now}
		l.seen[addr] = w
	}
	w.n++
	return w.n <= l.max, w.start.Add(l.window).Sub(now)
}

// log is the logger of the request that c2 belongs to (its RequestCtx, or a context from Config.Context):
// its lines carry the request's id. Handlers log through it, never through Config.Logger
// (TestConsoleLogsWithTheRequestID enforces it).
func (c *Console) log(c2 context.Context) *zerolog.Logger { return reqlog.Logger(c2, &c.cfg.Logger) }
