package console

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/internal/accounts"
	"filigrane/internal/authlimit"
	"filigrane/internal/hiddenchar"
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
	email, err := accounts.NormaliseEmail(form.Get("email"))
	if err != nil {
		c.membersPage(r, hiddenOr(err, "That is not an email address."), 422, "")
		return
	}
	// A person who has an account already may be invited too (they accept by signing in), unless they are
	// a member here already.
	existing, err := c.cfg.Accounts.ByEmail(r.c, email)
	switch {
	case err == nil:
		if accounts.CheckInviteExisting(existing, r.orgID, r.org.Members) != nil {
			c.membersPage(r, "This person is a member of the organization already.", 409, "")
			return
		}
	case !errors.Is(err, accounts.ErrNotFound):
		c.unavailablePage(r.ctx, err)
		return
	}
	token, _, err := c.cfg.Accounts.CreateInvite(r.c, r.orgID, email, string(role), r.user.ID)
	switch {
	case errors.Is(err, accounts.ErrBadEmail):
		c.membersPage(r, "That is not an email address.", 422, "")
		return
	case err != nil:
		c.log(r.c).Error().Err(err).Msg("console: invite")
		c.errorPage(r.ctx, 503, "The invitation could not be created. Try again in a moment.")
		return
	}
	base := c.cfg.PublicURL
	if base == "" {
		base = "http://" + string(r.ctx.Host())
		if c.secure(r.ctx) {
			base = "https://" + string(r.ctx.Host())
		}
	}
	c.membersPage(r, "", 201, base+Prefix+"/invite/"+token)
}

type inviteData struct {
	Token, OrgName, Role, Email string
	// Existing: the email has an account, so the page asks for its password (not a new one); SignedIn: the
	// browser's session is that account's, so joining needs only the button.
	Existing, SignedIn bool
}

// inviteeSession returns the browser's session and its user, if it presents a live one.
func (c *Console) inviteeSession(ctx *fasthttp.RequestCtx, c2 context.Context) (string, *accounts.User, error) {
	secret := string(ctx.Request.Header.Cookie(sessionCookie))
	if secret == "" {
		return "", nil, nil
	}
	_, u, err := c.cfg.Accounts.SessionFrom(c2, secret, c.cfg.ClientIP(ctx))
	if errors.Is(err, accounts.ErrNoSession) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	return secret, u, nil
}

// wrongAccount answers a browser signed in as someone other than the invited email.
func (c *Console) wrongAccount(ctx *fasthttp.RequestCtx, u *accounts.User, inv *accounts.Invite) {
	c.errorPage(ctx, 403, fmt.Sprintf("You are signed in as %s, but this invitation is for %s. Sign out, then open the link again.", isolate(u.Email), isolate(inv.Email)))
}

// invitePage and acceptInvite serve the invitation link: no session yet, so the form carries a pre-session
// token (double submit) like the sign-in form, and attempts count against the per-address sign-in limit.
func (c *Console) inviteRoute(ctx *fasthttp.RequestCtx, token string) {
	c2, cancel := c.cfg.Context(ctx, c.cfg.Timeout)
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
	// Within the node's bounds on unknown credentials: anyone can open random links.
	inv, _, err := c.cfg.Accounts.LookupInviteFrom(c2, token, c.cfg.ClientIP(ctx))
	if errors.Is(err, accounts.ErrNoInvite) {
		c.inviteGone(ctx)
		return
	}
	if err != nil {
		c.unavailablePage(ctx, err)
		return
	}
	secret, u, err := c.inviteeSession(ctx, c2)
	if err != nil {
		c.unavailablePage(ctx, err)
		return
	}
	if secret != "" && u.Email != inv.Email {
		c.wrongAccount(ctx, u, inv)
		return
	}
	c.renderInvite(ctx, inv, token, "", 200)
}

func (c *Console) renderInvite(ctx *fasthttp.RequestCtx, inv *accounts.Invite, token, msg string, status int) {
	c2, cancel := c.cfg.Context(ctx, c.cfg.Timeout)
	defer cancel()
	name := inv.OrgID
	if org, _, err := c.cfg.Orgs.Load(c2, inv.OrgID); err == nil {
		name = org.Name
	}
	data := inviteData{Token: token, OrgName: name, Role: inv.Role, Email: inv.Email}
	if _, err := c.cfg.Accounts.ByEmail(c2, inv.Email); err == nil {
		data.Existing = true
		if secret, u, err := c.inviteeSession(ctx, c2); err == nil && secret != "" && u.Email == inv.Email {
			data.SignedIn = true
		}
	}
	pre := randomToken()
	c.setCookie(ctx, preSessionCookie, pre, 30*time.Minute)
	c.renderPage(ctx, "invite", status, view{Title: "Join " + isolate(name), CSRF: pre, Error: msg, Data: data})
}

func (c *Console) acceptInvite(ctx *fasthttp.RequestCtx, token string) {
	form, ok := c.preSessionForm(ctx, "/invite", func(int) {
		c.errorPage(ctx, 429, "Too many attempts from your address. Wait a minute.")
	})
	if !ok {
		return
	}
	c2, cancel := c.cfg.Context(ctx, c.cfg.Timeout)
	defer cancel()
	inv, _, err := c.cfg.Accounts.LookupInvite(c2, token)
	if errors.Is(err, accounts.ErrNoInvite) {
		c.inviteGone(ctx)
		return
	}
	if err != nil {
		c.unavailablePage(ctx, err)
		return
	}
	switch u, err := c.cfg.Accounts.ByEmail(c2, inv.Email); {
	case err == nil:
		c.joinExisting(ctx, c2, inv, token, form.Get("password"), u)
		return
	case !errors.Is(err, accounts.ErrNotFound):
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
	inv, role, ok := c.claimInvite(ctx, c2, token)
	if !ok {
		return
	}
	memberID := actors.NewMemberID()
	if _, err := c.cfg.Orgs.Update(c2, inv.OrgID, func(st *actors.OrgState) error {
		return st.AddMember(memberID, inv.Email, role, c.cfg.Clock.Now())
	}); err != nil {
		c.unavailablePage(ctx, err)
		return
	}
	c.refresh(c2, inv.OrgID)
	if _, err := c.cfg.Accounts.CreateUser(c2, inv.Email, pw, inv.OrgID, memberID); err != nil {
		if errors.Is(err, accounts.ErrEmailTaken) {
			c.errorPage(ctx, 409, "Someone with this email has an account already.")
			return
		}
		c.unavailablePage(ctx, err)
		return
	}
	c.endBrowserSession(ctx, c2) // the browser's cookie is replaced below: its session must not outlive it
	secret, _, _, err := c.cfg.Accounts.SignIn(c2, inv.Email, pw)
	if err != nil {
		c.unavailablePage(ctx, err)
		return
	}
	c.clearCookie(ctx, preSessionCookie)
	c.setCookie(ctx, sessionCookie, secret, 0)
	redirect(ctx, Prefix+"/usage")
}

// joinExisting accepts an invitation for an email that has an account: the browser's session if it is that
// account's, else a sign-in with the account's password (a session of another email is refused: the link is
// not theirs). Then, in this order: the rules (CheckJoin: not a member already, at most MaxMemberships), the
// claim (one use), the member in the organization's record, the membership in the account, the
// organization's actor told (so the member's keys work at once), and the session switched to the
// organization.
func (c *Console) joinExisting(ctx *fasthttp.RequestCtx, c2 context.Context, inv *accounts.Invite, token, pw string, u *accounts.User) {
	secret, su, err := c.inviteeSession(ctx, c2)
	if err != nil {
		c.unavailablePage(ctx, err)
		return
	}
	switch {
	case secret != "" && su.Email != inv.Email:
		c.wrongAccount(ctx, su, inv)
		return
	case secret != "":
		u = su
	default:
		var locked *accounts.LockedError
		secret, _, u, err = c.cfg.Accounts.SignIn(c2, inv.Email, pw)
		switch {
		case errors.As(err, &locked):
			c.renderInvite(ctx, inv, token, c.lockedMessage(ctx, locked), 429)
			return
		case errors.Is(err, accounts.ErrBadCredentials):
			c.renderInvite(ctx, inv, token, "Wrong password.", 401)
			return
		case err != nil:
			c.unavailablePage(ctx, err)
			return
		}
		// Signed in from here on, whatever happens to the invitation.
		c.setCookie(ctx, sessionCookie, secret, 0)
	}
	org, _, err := c.cfg.Orgs.Load(c2, inv.OrgID)
	if err != nil {
		c.unavailablePage(ctx, err)
		return
	}
	if !c.joinAllowed(ctx, accounts.CheckJoin(inv, u, org.Members)) {
		return
	}
	inv, role, ok := c.claimInvite(ctx, c2, token)
	if !ok {
		return
	}
	memberID := actors.NewMemberID()
	if _, err := c.cfg.Orgs.Update(c2, inv.OrgID, func(st *actors.OrgState) error {
		// Again inside the compare-and-set: two links for the same person cannot make two members.
		if err := accounts.CheckInviteExisting(u, inv.OrgID, st.Members); err != nil {
			return err
		}
		return st.AddMember(memberID, inv.Email, role, c.cfg.Clock.Now())
	}); err != nil {
		if !c.joinAllowed(ctx, err) {
			return
		}
		c.unavailablePage(ctx, err)
		return
	}
	if _, err := c.cfg.Accounts.AddMembership(c2, u.ID, accounts.Membership{OrgID: inv.OrgID, MemberID: memberID}); err != nil {
		// The account took another organization meanwhile (a race with CheckJoin): the member just added
		// is marked removed again, so the organization does not count someone who cannot reach it.
		if errors.Is(err, accounts.ErrTooManyOrgs) {
			if _, uerr := c.cfg.Orgs.Update(c2, inv.OrgID, func(st *actors.OrgState) error {
				for i := range st.Members {
					if st.Members[i].ID == memberID && st.Members[i].RemovedAt == nil {
						now := c.cfg.Clock.Now()
						st.Members[i].RemovedAt = &now
					}
				}
				return nil
			}); uerr != nil {
				c.log(ctx).Error().Err(uerr).Str("org", inv.OrgID).Msg("console: undo a member whose account is full")
			}
		}
		if !c.joinAllowed(ctx, err) {
			return
		}
		c.unavailablePage(ctx, err)
		return
	}
	c.refresh(c2, inv.OrgID)
	if _, err := c.cfg.Accounts.SwitchOrg(c2, secret, inv.OrgID); err != nil {
		c.unavailablePage(ctx, err)
		return
	}
	c.clearCookie(ctx, preSessionCookie)
	redirect(ctx, Prefix+"/usage")
}

// inviteGone answers an invitation link that was claimed already or expired.
func (c *Console) inviteGone(ctx *fasthttp.RequestCtx) {
	c.errorPage(ctx, 410, "This invitation link was used already, or it expired. Ask for a new one.")
}

// claimInvite claims the invitation (one use, even when two people click at once) and returns it with the
// role it grants, or answers the page (410 when it was claimed already or expired) and reports false.
func (c *Console) claimInvite(ctx *fasthttp.RequestCtx, c2 context.Context, token string) (*accounts.Invite, actors.Role, bool) {
	inv, err := c.cfg.Accounts.ClaimInvite(c2, token)
	if errors.Is(err, accounts.ErrNoInvite) {
		c.inviteGone(ctx)
		return nil, "", false
	}
	if err != nil {
		c.unavailablePage(ctx, err)
		return nil, "", false
	}
	role, err := actors.ParseRole(inv.Role)
	if err != nil {
		c.unavailablePage(ctx, err)
		return nil, "", false
	}
	return inv, role, true
}

// joinAllowed answers a refusal of CheckJoin (and reports false), or reports true for nil and other errors.
func (c *Console) joinAllowed(ctx *fasthttp.RequestCtx, err error) bool {
	switch {
	case errors.Is(err, accounts.ErrAlreadyMember):
		c.errorPage(ctx, 409, "You are a member of this organization already.")
	case errors.Is(err, accounts.ErrTooManyOrgs):
		c.errorPage(ctx, 409, fmt.Sprintf("You belong to %d organizations, the most one person may. Leave one, then open the link again.", accounts.MaxMemberships))
	case errors.Is(err, accounts.ErrWrongAccount):
		c.errorPage(ctx, 403, "This invitation is for another email.")
	default:
		return true
	}
	return false
}

// unavailablePage answers a dependency that failed with 503, or a session lookup the node's bounds refused
// as authenticate does.
func (c *Console) unavailablePage(ctx *fasthttp.RequestCtx, err error) {
	var refused *authlimit.Refusal
	if errors.As(err, &refused) {
		c.refuseLookup(ctx, refused, false)
		return
	}
	c.log(ctx).Error().Err(err).Str("path", string(ctx.Path())).Msg("console: dependency failed")
	c.errorPage(ctx, 503, "Something did not answer in time. Try again in a moment.")
}

// hiddenOr is the sentence for a name or address refused by internal/hiddenchar's rule: which hidden
// character it holds (one that shows nothing or reorders the text, so the person cannot see what to remove
// without being told), else msg.
func hiddenOr(err error, msg string) string {
	var h *hiddenchar.Error
	if errors.As(err, &h) {
		return fmt.Sprintf("That holds a hidden character, %U, which shows nothing or reorders the text around it: type it again without it.", h.Rune)
	}
	return msg
}
