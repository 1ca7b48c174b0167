package accounts

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"filigrane/actors"
	"filigrane/internal/hiddenchar"
)

// The rules of membership administration from the console. They are pure: they read and change an
// organization record in memory; the caller applies them inside the record's compare-and-set update, so two
// owners demoting each other at once cannot leave the organization without one (the second update re-reads
// the first's result and is refused).
//
//   - owners change anyone's role (to any role) and remove anyone;
//   - admins change the roles of admins and members, to admin or member, and remove admins and members;
//   - members change no role; anyone may remove themselves (leave);
//   - an organization keeps at least one active owner: its last owner cannot be demoted or removed.

// Errors of the rules; the console shows each as a sentence.
var (
	ErrRoleForbidden = errors.New("accounts: your role does not allow this")
	ErrLastOwner     = errors.New("accounts: an organization keeps at least one owner")
	ErrNoSuchMember  = errors.New("accounts: no such member in the organization")
	ErrBadOrgName    = errors.New("accounts: an organization name has 1 to 100 characters, none of them hidden")
	ErrAlreadyMember = errors.New("accounts: the person is a member of the organization already")
	ErrWrongAccount  = errors.New("accounts: the invitation is for another email")
)

// CheckInviteExisting says whether a person who already has account u may be invited into the organization
// whose members are members: not when they are an active member there already.
func CheckInviteExisting(u *User, orgID string, members []actors.Member) error {
	if m, ok := u.In(orgID); ok {
		if _, ok := active(members, m.MemberID); ok {
			return ErrAlreadyMember
		}
	}
	return nil
}

// CheckJoin says whether account u (signed in, or having just signed in) may accept invitation inv into the
// organization whose members are members: the invitation must be for u's email (someone signed in as another
// email cannot use the link), u must not be an active member there already, and u must stay within
// MaxMemberships (a membership of the organization from which u was removed is replaced, not added).
func CheckJoin(inv *Invite, u *User, members []actors.Member) error {
	if u.Email != inv.Email {
		return ErrWrongAccount
	}
	if err := CheckInviteExisting(u, inv.OrgID, members); err != nil {
		return err
	}
	if _, ok := u.In(inv.OrgID); ok {
		return nil
	}
	return u.CanAddMembership()
}

// MaxOrgNameLen bounds an organization's name, in characters.
const MaxOrgNameLen = 100

func active(members []actors.Member, id string) (actors.Member, bool) {
	for _, m := range members {
		if m.ID == id && m.RemovedAt == nil {
			return m, true
		}
	}
	return actors.Member{}, false
}

func activeOwners(members []actors.Member) int {
	n := 0
	for _, m := range members {
		if m.RemovedAt == nil && m.Role == actors.RoleOwner {
			n++
		}
	}
	return n
}

// CheckRoleChange says whether member by may give member target the role to.
func CheckRoleChange(members []actors.Member, by, target string, to actors.Role) error {
	if _, err := actors.ParseRole(string(to)); err != nil {
		return fmt.Errorf("%w: %v", ErrRoleForbidden, err)
	}
	actor, ok := active(members, by)
	if !ok {
		return ErrRoleForbidden
	}
	t, ok := active(members, target)
	if !ok {
		return ErrNoSuchMember
	}
	switch actor.Role {
	case actors.RoleOwner:
	case actors.RoleAdmin:
		if t.Role == actors.RoleOwner || to == actors.RoleOwner {
			return ErrRoleForbidden
		}
	default:
		return ErrRoleForbidden
	}
	if t.Role == actors.RoleOwner && to != actors.RoleOwner && activeOwners(members) <= 1 {
		return ErrLastOwner
	}
	return nil
}

// ChangeRole checks CheckRoleChange against st and applies it.
func ChangeRole(st *actors.OrgState, by, target string, to actors.Role) error {
	if err := CheckRoleChange(st.Members, by, target, to); err != nil {
		return err
	}
	for i := range st.Members {
		if st.Members[i].ID == target {
			st.Members[i].Role = to
		}
	}
	return nil
}

// CheckRemoval says whether member by may remove member target.
func CheckRemoval(members []actors.Member, by, target string) error {
	actor, ok := active(members, by)
	if !ok {
		return ErrRoleForbidden
	}
	t, ok := active(members, target)
	if !ok {
		return ErrNoSuchMember
	}
	switch {
	case by == target:
	case actor.Role == actors.RoleOwner:
	case actor.Role == actors.RoleAdmin && t.Role != actors.RoleOwner:
	default:
		return ErrRoleForbidden
	}
	if t.Role == actors.RoleOwner && activeOwners(members) <= 1 {
		return ErrLastOwner
	}
	return nil
}

// RemoveMember checks CheckRemoval against st and marks the member removed at now (their keys stop working,
// their console sessions in this organization end at their next request).
func RemoveMember(st *actors.OrgState, by, target string, now time.Time) error {
	if err := CheckRemoval(st.Members, by, target); err != nil {
		return err
	}
	for i := range st.Members {
		if st.Members[i].ID == target && st.Members[i].RemovedAt == nil {
			t := now
			st.Members[i].RemovedAt = &t
		}
	}
	return nil
}

// OrgName checks and trims an organization's name: 1 to 100 characters, none hidden (a *hiddenchar.Error
// wrapping ErrBadOrgName).
func OrgName(name string) (string, error) {
	n := strings.TrimSpace(name)
	if n == "" || !utf8.ValidString(n) || utf8.RuneCountInString(n) > MaxOrgNameLen {
		return "", ErrBadOrgName
	}
	if err := hiddenchar.Name(ErrBadOrgName, n); err != nil {
		return "", err
	}
	return n, nil
}

// NewOrganization returns the record of an organization created by a signed-in user: named name, on plan,
// with no credits (the operator grants them), and one member, the creator, as its owner.
func NewOrganization(orgID, name, plan, ownerMemberID, ownerName string, now time.Time) (*actors.OrgState, error) {
	n, err := OrgName(name)
	if err != nil {
		return nil, err
	}
	st := actors.NewOrgState(orgID, n, plan, now)
	if err := st.AddMember(ownerMemberID, ownerName, actors.RoleOwner, now); err != nil {
		return nil, err
	}
	return st, nil
}
