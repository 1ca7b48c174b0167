package console

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/internal/accounts"
)

type membersData struct {
	Members   []memberRow
	MayInvite bool
	Owner     bool
	Link      string
}

// memberRow is one member with what the signed-in person may do to them (accounts' rules): the roles they
// may give (the current one first, so the form shows it selected) and whether they may remove them.
type memberRow struct {
	actors.Member
	Self      bool
	Roles     []actors.Role
	MayRemove bool
}

func (c *Console) membersPage(r *request, msg string, status int, link string) {
	var rows []memberRow
	for _, m := range r.org.Members {
		if m.RemovedAt != nil {
			continue
		}
		row := memberRow{Member: m, Self: m.ID == r.memberID,
			MayRemove: accounts.CheckRemoval(r.org.Members, r.memberID, m.ID) == nil}
		var others []actors.Role
		for _, to := range []actors.Role{actors.RoleOwner, actors.RoleAdmin, actors.RoleMember} {
			if to != m.Role && accounts.CheckRoleChange(r.org.Members, r.memberID, m.ID, to) == nil {
				others = append(others, to)
			}
		}
		if len(others) > 0 {
			row.Roles = append([]actors.Role{m.Role}, others...)
		}
		rows = append(rows, row)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].AddedAt.Before(rows[j].AddedAt) })
	c.render(r, "members", status, view{Title: "Members", Nav: "members", Error: msg,
		Data: membersData{Members: rows, MayInvite: r.admin(), Owner: r.role == actors.RoleOwner, Link: link}})
}

// invite creates a one-time invitation link. Owners invite any role, admins admins and members.
func (c *Console) invite(r *request) {
	if !r.admin() {
		c.membersPage(r, "Only owners and admins invite people.", 403, "")
		return
	}
	form, ok := c.form(r.ctx)
	if !ok {
		return
	}
	role, err := actors.ParseRole(form.Get("role"))
	if err != nil || (role == actors.RoleOwner && r.role != actors.RoleOwner) {
		c.membersPage(r, "Choose a role you may grant.", 422, "")
		return
	}
	token, _, err := c.cfg.Accounts.CreateInvite(r.c, r.orgID, form.Get("email"), string(role), r.user.ID)
	switch {
	case errors.Is(err, accounts.ErrBadEmail):
		c.membersPage(r, "That is not an email address.", 422, "")
		return
	case errors.Is(err, accounts.ErrEmailTaken):
		c.membersPage(r, "Someone with this email has an account already.", 409, "")
		return
	case err != nil:
		c.cfg.Logger.Error().Err(err).Msg("console: invite")
		c.errorPage(r.ctx, 503, "The invitation could not be created. Try again in a moment.")
		return
	}
	scheme := "http://"
	if c.secure(r.ctx) {
		scheme = "https://"
	}
	c.membersPage(r, "", 201, scheme+string(r.ctx.Host())+Prefix+"/invite/"+token)
}

type inviteData struct {
	Token, OrgName, Role, Email string
}

// invitePage and acceptInvite serve the invitation link: no session yet, so the form carries a pre-session
// token (double submit) like the sign-in form, and attempts count against the per-address sign-in limit.
func (c *Console) inviteRoute(ctx *fasthttp.RequestCtx, token string) {
	c2, cancel := c.cfg.Context(c.cfg.Timeout)
	defer cancel()
	method := string(ctx.Method())
	if method == "POST" {
		c.acceptInvite(ctx, token)
		return
	}
	if method != "GET" && method != "HEAD" {
		c.methodNotAllowed(ctx, "GET, POST")
		return
	}
	inv, _, err := c.cfg.Accounts.LookupInvite(c2, token)
	if errors.Is(err, accounts.ErrNoInvite) {
		c.errorPage(ctx, 410, "This invitation link was used already, or it expired. Ask for a new one.")
		return
	}
	if err != nil {
		c.cfg.Logger.Error().Err(err).Msg("console: read invitation")
		c.errorPage(ctx, 503, "The invitation could not be read. Try again in a moment.")
		return
	}
	c.renderInvite(ctx, inv, token, "", 200)
}

func (c *Console) renderInvite(ctx *fasthttp.RequestCtx, inv *accounts.Invite, token, msg string, status int) {
	c2, cancel := c.cfg.Context(c.cfg.Timeout)
	defer cancel()
	name := inv.OrgID
	if org, _, err := c.cfg.Orgs.Load(c2, inv.OrgID); err == nil {
		name = org.Name
	}
	pre := randomToken()
	c.setCookie(ctx, preSessionCookie, pre, 30*time.Minute)
	c.renderPage(ctx, "invite", status, view{Title: "Join " + name, CSRF: pre, Error: msg,
		Data: inviteData{Token: token, OrgName: name, Role: inv.Role, Email: inv.Email}})
}

func (c *Console) acceptInvite(ctx *fasthttp.RequestCtx, token string) {
	if !c.sameOrigin(ctx) {
		c.refuseCSRF(ctx, "/invite", "the request came from another site")
		return
	}
	if ok, wait := c.limiter.allow(ctx.RemoteIP().String()); !ok {
		ctx.SetConnectionClose()
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(int(wait.Seconds()+0.999)))
		c.errorPage(ctx, 429, "Too many attempts from your address. Wait a minute.")
		return
	}
	form, ok := c.form(ctx)
	if !ok {
		return
	}
	if !c.preSessionTokenOK(ctx, form.Get(csrfField)) {
		c.refuseCSRF(ctx, "/invite", "the form's security token is missing or wrong; reload the page and try again")
		return
	}
	c2, cancel := c.cfg.Context(c.cfg.Timeout)
	defer cancel()
	inv, _, err := c.cfg.Accounts.LookupInvite(c2, token)
	if errors.Is(err, accounts.ErrNoInvite) {
		c.errorPage(ctx, 410, "This invitation link was used already, or it expired. Ask for a new one.")
		return
	}
	if err != nil {
		c.unavailablePage(ctx, err)
		return
	}
	pw := form.Get("password")
	if pw != form.Get("confirm") {
		c.renderInvite(ctx, inv, token, "The passwords do not match.", 422)
		return
	}
	if err := accounts.CheckPassword(pw); err != nil {
		c.renderInvite(ctx, inv, token, fmt.Sprintf("Use %d to %d characters.", accounts.MinPasswordLen, accounts.MaxPasswordLen), 422)
		return
	}
	// Claimed first (one use, even when two people click at once), then the member, then the account.
	inv, err = c.cfg.Accounts.ClaimInvite(c2, token)
	if errors.Is(err, accounts.ErrNoInvite) {
		c.errorPage(ctx, 410, "This invitation link was used already, or it expired. Ask for a new one.")
		return
	}
	if err != nil {
		c.unavailablePage(ctx, err)
		return
	}
	role, err := actors.ParseRole(inv.Role)
	if err != nil {
		c.unavailablePage(ctx, err)
		return
	}
	memberID := actors.NewMemberID()
	if _, err := c.cfg.Orgs.Update(c2, inv.OrgID, func(st *actors.OrgState) error {
		return st.AddMember(memberID, inv.Email, role, c.cfg.Clock.Now())
	}); err != nil {
		c.unavailablePage(ctx, err)
		return
	}
	if err := c.cfg.OrgCalls.Refresh(c2, inv.OrgID); err != nil {
		c.cfg.Logger.Warn().Err(err).Str("org", inv.OrgID).Msg("console: refresh the organization's actor")
	}
	if _, err := c.cfg.Accounts.CreateUser(c2, inv.Email, pw, inv.OrgID, memberID); err != nil {
		if errors.Is(err, accounts.ErrEmailTaken) {
			c.errorPage(ctx, 409, "Someone with this email has an account already.")
			return
		}
		c.unavailablePage(ctx, err)
		return
	}
	secret, _, _, err := c.cfg.Accounts.SignIn(c2, inv.Email, pw)
	if err != nil {
		c.unavailablePage(ctx, err)
		return
	}
	c.clearCookie(ctx, preSessionCookie)
	c.setCookie(ctx, sessionCookie, secret, 0)
	redirect(ctx, Prefix+"/usage")
}

func (c *Console) unavailablePage(ctx *fasthttp.RequestCtx, err error) {
	c.cfg.Logger.Error().Err(err).Str("path", string(ctx.Path())).Msg("console: dependency failed")
	c.errorPage(ctx, 503, "Something did not answer in time. Try again in a moment.")
}
