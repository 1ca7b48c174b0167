package accounts

import (
	"context"
	"errors"
	"fmt"

	"filigrane/actors/durable"
)

// Membership is one organization a user belongs to, and the member they are there.
type Membership struct {
	OrgID    string `msgpack:"org_id"`
	MemberID string `msgpack:"member_id"`
}

// MaxMemberships bounds the organizations of one user: every console page may list them, and each creation
// from the console writes one more.
const MaxMemberships = 20

// Errors of memberships.
var (
	ErrTooManyOrgs = fmt.Errorf("accounts: a user belongs to at most %d organizations", MaxMemberships)
	ErrNotMember   = errors.New("accounts: the user is not a member of that organization")
)

// All returns the user's memberships, the one the user was created with first, without duplicates.
func (u *User) All() []Membership {
	out := make([]Membership, 0, 1+len(u.Memberships))
	seen := map[string]bool{}
	for _, m := range append([]Membership{{OrgID: u.OrgID, MemberID: u.MemberID}}, u.Memberships...) {
		if m.OrgID == "" || seen[m.OrgID] {
			continue
		}
		seen[m.OrgID] = true
		out = append(out, m)
	}
	return out
}

// In returns the user's membership of orgID.
func (u *User) In(orgID string) (Membership, bool) {
	for _, m := range u.All() {
		if m.OrgID == orgID {
			return m, true
		}
	}
	return Membership{}, false
}

// Active returns the membership the session works in: the one it switched to, else the user's first.
func (s *Session) Active(u *User) Membership {
	if s.OrgID != "" {
		if m, ok := u.In(s.OrgID); ok {
			return m
		}
	}
	return Membership{OrgID: u.OrgID, MemberID: u.MemberID}
}

// AddMembership records that the user is member memberID of orgID (after the organization record says so).
// Adding a membership the user has is a no-op; a membership of orgID under another member id (the person was
// removed and invited again) is replaced; past MaxMemberships: ErrTooManyOrgs.
func (a *Accounts) AddMembership(ctx context.Context, userID string, m Membership) (*User, error) {
	if m.OrgID == "" || m.MemberID == "" {
		return nil, errors.New("accounts: a membership needs an organization and a member")
	}
	var tooMany bool
	u, err := a.update(ctx, userID, func(u *User) {
		tooMany = false
		if cur, ok := u.In(m.OrgID); ok {
			if cur.MemberID != m.MemberID {
				replaceMembership(u, m)
			}
			return
		}
		if len(u.All()) >= MaxMemberships {
			tooMany = true
			return
		}
		u.Memberships = append(append([]Membership(nil), u.Memberships...), m)
	})
	if err != nil {
		return nil, err
	}
	if tooMany {
		return nil, ErrTooManyOrgs
	}
	return u, nil
}

// CanAddMembership reports ErrTooManyOrgs before anything is created for a user at the bound.
func (u *User) CanAddMembership() error {
	if len(u.All()) >= MaxMemberships {
		return ErrTooManyOrgs
	}
	return nil
}

// SwitchOrg makes the session of secret work in orgID, which must be one of its user's memberships (the
// caller checks that the organization still counts the member as active).
func (a *Accounts) SwitchOrg(ctx context.Context, secret, orgID string) (*Session, error) {
	s, u, err := a.Session(ctx, secret)
	if err != nil {
		return nil, err
	}
	m, ok := u.In(orgID)
	if !ok {
		return nil, ErrNotMember
	}
	if s.OrgID == m.OrgID && s.MemberID == m.MemberID {
		return s, nil
	}
	next, err := durable.Update(ctx, a.Store, sessionKey(secret), 0, func(cur *Session) (*Session, error) {
		if cur == nil || cur.UserID != u.ID {
			return nil, ErrNoSession
		}
		n := *cur
		n.OrgID, n.MemberID = m.OrgID, m.MemberID
		return &n, nil
	})
	if err != nil {
		return nil, fmt.Errorf("switch organization: %w", err)
	}
	return next, nil
}

// replaceMembership makes m the user's membership of m.OrgID.
func replaceMembership(u *User, m Membership) {
	if u.OrgID == m.OrgID {
		u.MemberID = m.MemberID
	}
	ms := append([]Membership(nil), u.Memberships...)
	for i := range ms {
		if ms[i].OrgID == m.OrgID {
			ms[i].MemberID = m.MemberID
		}
	}
	u.Memberships = ms
}
