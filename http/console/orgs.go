package console

import (
	"context"
	"errors"
	"sort"

	"filigrane/actors"
	"filigrane/internal/accounts"
	"filigrane/persistence"
)

// orgRow is one of the user's organizations on the organizations page.
type orgRow struct {
	ID, Name string
	Role     actors.Role
	Current  bool
}

type orgsData struct {
	Orgs      []orgRow
	MayCreate bool
	Max       int
	MaxName   int
}

// orgsPage lists the user's organizations (those that still count them as a member) with a switch button
// each, and the form to create one.
func (c *Console) orgsPage(r *request, msg string, status int) {
	var rows []orgRow
	for _, m := range r.user.All() {
		org, _, err := c.cfg.Orgs.Load(r.c, m.OrgID)
		if errors.Is(err, persistence.ErrNotFound) {
			continue
		}
		if err != nil {
			c.unavailablePage(r.ctx, err)
			return
		}
		mem, ok := org.Member(m.MemberID)
		if !ok || mem.RemovedAt != nil {
			continue
		}
		rows = append(rows, orgRow{ID: org.ID, Name: org.Name, Role: mem.Role, Current: org.ID == r.orgID})
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	c.render(r, "orgs", status, view{Title: "Organizations", Nav: "orgs", Error: msg,
		Data: orgsData{Orgs: rows, MayCreate: r.user.CanAddMembership() == nil, Max: accounts.MaxMemberships, MaxName: accounts.MaxOrgNameLen}})
}

// createOrg makes an organization whose one member, its owner, is the signed-in user, and switches the
// session to it. The record first, then the user's membership: a crash between them leaves an organization
// nobody reaches from the console (an operator sees it in `filigrane admin org list`), never a membership
// that points nowhere.
func (c *Console) createOrg(r *request) {
	form, ok := c.form(r.ctx)
	if !ok {
		return
	}
	if err := r.user.CanAddMembership(); err != nil {
		c.orgsPage(r, "You belong to the most organizations one person may.", 409)
		return
	}
	plan, ok := c.cfg.Catalog.Plan(c.cfg.NewOrgPlan)
	if !ok {
		c.log(r.c).Error().Str("plan", c.cfg.NewOrgPlan).Msg("console: the plan of new organizations is not in the catalog")
		c.errorPage(r.ctx, 503, "Organizations cannot be created on this node now.")
		return
	}
	st, err := accounts.NewOrganization(actors.NewOrgID(), form.Get("name"), plan.Name, actors.NewMemberID(), r.user.Email, c.cfg.Clock.Now())
	if errors.Is(err, accounts.ErrBadOrgName) {
		c.orgsPage(r, hiddenOr(err, "Give the organization a name of 1 to 100 characters."), 422)
		return
	}
	if err != nil {
		c.unavailablePage(r.ctx, err)
		return
	}
	if err := c.cfg.Orgs.Create(r.c, st); err != nil {
		c.unavailablePage(r.ctx, err)
		return
	}
	if _, err := c.cfg.Accounts.AddMembership(r.c, r.user.ID, accounts.Membership{OrgID: st.ID, MemberID: st.Members[0].ID}); err != nil {
		if errors.Is(err, accounts.ErrTooManyOrgs) {
			c.orgsPage(r, "You belong to the most organizations one person may.", 409)
			return
		}
		c.unavailablePage(r.ctx, err)
		return
	}
	if _, err := c.cfg.Accounts.SwitchOrg(r.c, string(r.ctx.Request.Header.Cookie(sessionCookie)), st.ID); err != nil {
		c.unavailablePage(r.ctx, err)
		return
	}
	redirect(r.ctx, Prefix+"/members")
}

// switchOrg moves the session to another of the user's organizations.
func (c *Console) switchOrg(r *request) {
	form, ok := c.form(r.ctx)
	if !ok {
		return
	}
	id := form.Get("org")
	m, ok := r.user.In(id)
	if !ok {
		c.orgsPage(r, "You are not a member of that organization.", 404)
		return
	}
	org, _, err := c.cfg.Orgs.Load(r.c, m.OrgID)
	if err != nil && !errors.Is(err, persistence.ErrNotFound) {
		c.unavailablePage(r.ctx, err)
		return
	}
	if err != nil {
		c.orgsPage(r, "That organization no longer exists.", 404)
		return
	}
	if mem, ok := org.Member(m.MemberID); !ok || mem.RemovedAt != nil {
		c.orgsPage(r, "You are no longer a member of that organization.", 403)
		return
	}
	if _, err := c.cfg.Accounts.SwitchOrg(r.c, string(r.ctx.Request.Header.Cookie(sessionCookie)), id); err != nil {
		c.unavailablePage(r.ctx, err)
		return
	}
	redirect(r.ctx, Prefix+"/usage")
}

// changeRole gives a member another role, by the rules of accounts.ChangeRole checked inside the
// organization record's compare-and-set update.
func (c *Console) changeRole(r *request, memberID string) {
	form, ok := c.form(r.ctx)
	if !ok {
		return
	}
	to, err := actors.ParseRole(form.Get("role"))
	if err != nil {
		c.membersPage(r, "Choose owner, admin or member.", 422, "")
		return
	}
	st, err := c.cfg.Orgs.Update(r.c, r.orgID, func(st *actors.OrgState) error {
		return accounts.ChangeRole(st, r.memberID, memberID, to)
	})
	if c.memberChangeRefused(r, err) {
		return
	}
	c.refresh(r.c, r.orgID)
	r.org = st
	if m, ok := st.Member(r.memberID); ok {
		r.role = m.Role // the person may have changed their own role
	}
	c.membersPage(r, "", 200, "")
}

// removeMember removes a member (or the signed-in person themselves: leaving); their keys stop working and
// their console sessions leave the organization at their next request.
func (c *Console) removeMember(r *request, memberID string) {
	st, err := c.cfg.Orgs.Update(r.c, r.orgID, func(st *actors.OrgState) error {
		return accounts.RemoveMember(st, r.memberID, memberID, c.cfg.Clock.Now())
	})
	if c.memberChangeRefused(r, err) {
		return
	}
	c.refresh(r.c, r.orgID)
	if memberID == r.memberID {
		redirect(r.ctx, Prefix+"/orgs") // the session moves to another organization, or ends
		return
	}
	r.org = st
	c.membersPage(r, "", 200, "")
}

// memberChangeRefused answers a refused or failed member change and reports whether it did.
func (c *Console) memberChangeRefused(r *request, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, accounts.ErrLastOwner):
		c.membersPage(r, "The organization keeps at least one owner: make someone else owner first.", 409, "")
	case errors.Is(err, accounts.ErrRoleForbidden):
		c.membersPage(r, "Your role does not allow this change.", 403, "")
	case errors.Is(err, accounts.ErrNoSuchMember):
		c.membersPage(r, "There is no such member.", 404, "")
	default:
		c.unavailablePage(r.ctx, err)
	}
	return true
}

// refresh tells the organization's actor that its record changed here, so the change counts at the next
// admission of a key or console call. A failure is logged: the change is saved, and the actor reads it when
// its activation ends (idle) or its next write finds the record changed.
func (c *Console) refresh(ctx context.Context, orgID string) {
	if err := c.cfg.OrgCalls.Refresh(ctx, orgID); err != nil {
		c.log(ctx).Warn().Err(err).Str("org", orgID).Msg("console: refresh the organization's actor")
	}
}
