package console

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/internal/accounts"
)

// signInPage shows the sign-in form with a fresh pre-session CSRF token (double submit: cookie and field).
func (c *Console) signInPage(ctx *fasthttp.RequestCtx, msg string, status int) {
	token := randomToken()
	c.setCookie(ctx, preSessionCookie, token, 30*time.Minute)
	c.renderPage(ctx, "signin", status, view{Title: "Sign in", CSRF: token, Error: msg})
}

// preSessionForm reads a form posted without a session (sign-in, an invitation's): it must come from this
// site, within the per-address attempt limit, and carry the pre-session token (double submit). Otherwise it
// answers (tooMany answers the limit, after the connection close and Retry-After are set, with the seconds to
// wait) and reports false.
func (c *Console) preSessionForm(ctx *fasthttp.RequestCtx, path string, tooMany func(wait int)) (url.Values, bool) {
	if !c.sameOrigin(ctx) {
		c.refuseCSRF(ctx, path, "the request came from another site")
		return nil, false
	}
	if ok, wait := c.limiter.allow(c.cfg.ClientIP(ctx).String()); !ok {
		secs := int(wait.Seconds() + 0.999)
		ctx.SetConnectionClose()
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(secs))
		tooMany(secs)
		return nil, false
	}
	form, ok := c.form(ctx)
	if !ok {
		return nil, false
	}
	if !c.preSessionTokenOK(ctx, form.Get(csrfField)) {
		c.refuseCSRF(ctx, path, "the form's security token is missing or wrong; reload the page and try again")
		return nil, false
	}
	return form, true
}

// lockedMessage sets Retry-After for an account locked after failed sign-ins and returns the sentence that
// says how long to wait.
func (c *Console) lockedMessage(ctx *fasthttp.RequestCtx, locked *accounts.LockedError) string {
	wait := int(locked.Until.Sub(c.cfg.Clock.Now()).Seconds() + 0.999)
	ctx.Response.Header.Set("Retry-After", strconv.Itoa(max(wait, 1)))
	return fmt.Sprintf("This account is locked after repeated failed sign-ins. Try again in %d minutes.", (wait+59)/60)
}

func (c *Console) signIn(ctx *fasthttp.RequestCtx) {
	form, ok := c.preSessionForm(ctx, "/sign-in", func(wait int) {
		c.signInPage(ctx, fmt.Sprintf("Too many sign-in attempts from your address. Wait %d seconds.", wait), 429)
	})
	if !ok {
		return
	}
	c2, cancel := c.cfg.Context(ctx, c.cfg.Timeout)
	defer cancel()
	c.endBrowserSession(ctx, c2)
	secret, _, _, err := c.cfg.Accounts.SignIn(c2, form.Get("email"), form.Get("password"))
	var locked *accounts.LockedError
	switch {
	case errors.As(err, &locked):
		c.signInPage(ctx, c.lockedMessage(ctx, locked), 429)
		return
	case errors.Is(err, accounts.ErrBadCredentials):
		c.signInPage(ctx, "Wrong email or password.", 401)
		return
	case err != nil:
		c.log(ctx).Error().Err(err).Msg("console: sign-in failed")
		c.signInPage(ctx, "Signing in failed for a moment. Try again.", 503)
		return
	}
	c.clearCookie(ctx, preSessionCookie)
	c.setCookie(ctx, sessionCookie, secret, 0) // a browser-session cookie; the server ends it on expiry
	redirect(ctx, Prefix+"/usage")
}

// endBrowserSession ends, on the server, whatever session the browser's cookie names, before a sign-in (or an
// invitation's new account) issues a new secret: a session id planted before sign-in is then worth nothing after
// it, and a session whose cookie the browser is about to lose does not live on unseen until it expires.
func (c *Console) endBrowserSession(ctx *fasthttp.RequestCtx, c2 context.Context) {
	if old := ctx.Request.Header.Cookie(sessionCookie); len(old) > 0 {
		_ = c.cfg.Accounts.SignOut(c2, string(old))
	}
}

func (c *Console) signOut(r *request) {
	if err := c.cfg.Accounts.SignOut(r.c, string(r.ctx.Request.Header.Cookie(sessionCookie))); err != nil {
		c.log(r.c).Error().Err(err).Msg("console: sign-out failed")
	}
	c.clearCookie(r.ctx, sessionCookie)
	redirect(r.ctx, Prefix+"/sign-in")
}

// usage is the usage page's data.
type usage struct {
	Plan      actors.Plan
	Balance   int64
	Held      int64
	Available int64
	Entries   []actors.LedgerEntry
	Days      []day
	MaxDay    int64
}

// day is one bar of the use chart: credits charged on one UTC day.
type day struct {
	Date    string
	Credits int64
	// X, Height and Y place the bar in the chart's 0..100 coordinate space.
	X, Y, Height float64
}

// chartDays is how many days the use chart shows.
const chartDays = 30

// ledgerShown bounds the ledger entries read for the page (the table and the chart).
const ledgerShown = 1000

func (c *Console) usagePage(r *request) {
	bal, err := c.cfg.OrgCalls.Get(r.c, r.orgID)
	if err != nil {
		c.log(r.c).Error().Err(err).Msg("console: balance")
		c.errorPage(r.ctx, 503, "The balance could not be read. Try again in a moment.")
		return
	}
	from := uint64(0)
	if r.org.Seq > ledgerShown {
		from = r.org.Seq - ledgerShown + 1
	}
	entries, err := c.cfg.Orgs.Ledger(r.c, r.orgID, from, ledgerShown)
	if err != nil {
		c.log(r.c).Error().Err(err).Msg("console: ledger")
		c.errorPage(r.ctx, 503, "The ledger could not be read. Try again in a moment.")
		return
	}
	plan, _ := c.cfg.Catalog.Plan(bal.Plan)
	u := usage{Plan: plan, Balance: bal.Balance, Held: bal.Held, Available: bal.Available}
	u.Days, u.MaxDay = useByDay(entries, c.cfg.Clock.Now())
	sort.Slice(entries, func(i, j int) bool { return entries[i].Seq > entries[j].Seq })
	if len(entries) > 50 {
		entries = entries[:50]
	}
	u.Entries = entries
	c.render(r, "usage", 200, view{Title: "Usage and credits", Nav: "usage", Data: u})
}

// useByDay sums the credits charged per UTC day over the last chartDays days and lays the bars out.
func useByDay(entries []actors.LedgerEntry, now time.Time) ([]day, int64) {
	today := now.UTC().Truncate(24 * time.Hour)
	first := today.AddDate(0, 0, -(chartDays - 1))
	sums := make([]int64, chartDays)
	for _, e := range entries {
		if e.Kind != "charge" || e.At.Before(first) {
			continue
		}
		i := int(e.At.UTC().Sub(first) / (24 * time.Hour))
		if i >= 0 && i < chartDays {
			sums[i] += e.Amount
		}
	}
	var top int64
	for _, s := range sums {
		top = max(top, s)
	}
	days := make([]day, chartDays)
	w := 100.0 / chartDays
	for i, s := range sums {
		h := 0.0
		if top > 0 {
			h = 90 * float64(s) / float64(top)
		}
		days[i] = day{Date: first.AddDate(0, 0, i).Format("2006-01-02"), Credits: s, X: float64(i)*w + w*0.1, Height: h, Y: 100 - h}
	}
	return days, top
}

// keyRow is one API key as the keys page shows it.
type keyRow struct {
	actors.APIKey
	Status    string
	MayRevoke bool
	Mine      bool
}

type keysData struct {
	Keys    []keyRow
	Scopes  []string
	Created *createdKey
}

type createdKey struct {
	Secret string
	Key    actors.APIKey
}

func (c *Console) keysPage(r *request, msg string, status int) {
	c.renderKeys(r, msg, status, nil)
}

func (c *Console) renderKeys(r *request, msg string, status int, created *createdKey) {
	keys, err := c.cfg.Keys.List(r.c, r.orgID)
	if err != nil {
		c.log(r.c).Error().Err(err).Msg("console: list keys")
		c.errorPage(r.ctx, 503, "The keys could not be read. Try again in a moment.")
		return
	}
	now := c.cfg.Clock.Now()
	rows := make([]keyRow, 0, len(keys))
	for _, k := range keys {
		row := keyRow{APIKey: k, Status: "active", Mine: k.MemberID == r.memberID}
		switch {
		case k.RevokedAt != nil:
			row.Status = "revoked"
		case k.ExpiresAt != nil && !now.Before(*k.ExpiresAt):
			row.Status = "expired"
		}
		row.MayRevoke = row.Status == "active" && (row.Mine || r.admin())
		rows = append(rows, row)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].CreatedAt.After(rows[j].CreatedAt) })
	c.render(r, "keys", status, view{Title: "API keys", Nav: "keys", Error: msg,
		Data: keysData{Keys: rows, Scopes: actors.AllScopes(), Created: created}})
}

// keyLifetimes are the expiry choices of the key form.
var keyLifetimes = map[string]time.Duration{"30d": 30 * 24 * time.Hour, "90d": 90 * 24 * time.Hour, "365d": 365 * 24 * time.Hour, "never": 0}

// createKey makes a key for the signed-in member; the secret is shown on this one response and never again.
func (c *Console) createKey(r *request) {
	form, ok := c.form(r.ctx)
	if !ok {
		return
	}
	name := strings.TrimSpace(form.Get("name"))
	if name == "" || utf8.RuneCountInString(name) > 100 {
		c.keysPage(r, "Give the key a name of 1 to 100 characters.", 422)
		return
	}
	if err := actors.CheckKeyName(name); err != nil {
		c.keysPage(r, hiddenOr(err, "Give the key a name of 1 to 100 characters."), 422)
		return
	}
	life, ok := keyLifetimes[form.Get("expires")]
	if !ok {
		c.keysPage(r, "Choose an expiry from the list.", 422)
		return
	}
	scopes, err := actors.ValidateScopes(form["scope"])
	if err != nil {
		c.keysPage(r, "Choose at least one scope.", 422)
		return
	}
	spec := actors.NewKeySpec{OrgID: r.orgID, MemberID: r.memberID, Name: name, Scopes: scopes}
	if life > 0 {
		t := c.cfg.Clock.Now().Add(life)
		spec.ExpiresAt = &t
	}
	secret, key, err := c.cfg.Keys.Create(r.c, spec)
	if err != nil {
		c.log(r.c).Error().Err(err).Msg("console: create key")
		c.errorPage(r.ctx, 503, "The key could not be created. Try again in a moment.")
		return
	}
	c.renderKeys(r, "", 201, &createdKey{Secret: secret, Key: key})
}

func (c *Console) revokeKey(r *request, id string) {
	key, _, err := c.cfg.Keys.Get(r.c, id)
	if err != nil || key.OrgID != r.orgID {
		c.keysPage(r, "There is no such key.", 404)
		return
	}
	if key.MemberID != r.memberID && !r.admin() {
		c.keysPage(r, "Only owners and admins revoke other members' keys.", 403)
		return
	}
	if _, err := c.cfg.Keys.Revoke(r.c, id); err != nil {
		c.log(r.c).Error().Err(err).Msg("console: revoke key")
		c.errorPage(r.ctx, 503, "The key could not be revoked. Try again in a moment.")
		return
	}
	redirect(r.ctx, Prefix+"/keys")
}

func (c *Console) changePassword(r *request) {
	form, ok := c.form(r.ctx)
	if !ok {
		return
	}
	if form.Get("new") != form.Get("confirm") {
		c.render(r, "account", 422, view{Title: "Account", Nav: "account", Error: "The new passwords do not match."})
		return
	}
	secret, s, err := c.cfg.Accounts.ChangePassword(r.c, r.user.ID, form.Get("current"), form.Get("new"))
	switch {
	case errors.Is(err, accounts.ErrWeakPassword):
		c.render(r, "account", 422, view{Title: "Account", Nav: "account",
			Error: fmt.Sprintf("Use %d to %d characters.", accounts.MinPasswordLen, accounts.MaxPasswordLen)})
		return
	case errors.Is(err, accounts.ErrBadCredentials):
		c.render(r, "account", 403, view{Title: "Account", Nav: "account", Error: "The current password is wrong."})
		return
	case err != nil:
		c.log(r.c).Error().Err(err).Msg("console: change password")
		c.errorPage(r.ctx, 503, "The password could not be changed. Try again in a moment.")
		return
	}
	// Every other session ended with the change; this browser continues on a fresh one.
	c.setCookie(r.ctx, sessionCookie, secret, 0)
	r.session = s
	c.render(r, "account", 200, view{Title: "Account", Nav: "account", Notice: "Password changed. Every other session was signed out."})
}

// clusterPage lists the cluster's nodes; owners and admins only (it shows the deployment, not the
// organization).
func (c *Console) clusterPage(r *request) {
	if !r.admin() {
		c.render(r, "error", 403, view{Title: "Cluster", Nav: "cluster", Error: "Only owners and admins see the cluster."})
		return
	}
	var nodes []ClusterNode
	if c.cfg.Cluster != nil {
		nodes = c.cfg.Cluster()
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	c.render(r, "cluster", 200, view{Title: "Cluster", Nav: "cluster", Data: nodes})
}

// preSessionTokenOK checks the double-submit token of a form shown before any session: the field must equal
// the pre-session cookie.
func (c *Console) preSessionTokenOK(ctx *fasthttp.RequestCtx, field string) bool {
	cookie := ctx.Request.Header.Cookie(preSessionCookie)
	return len(cookie) > 0 && field != "" && subtle.ConstantTimeCompare(cookie, []byte(field)) == 1
}
