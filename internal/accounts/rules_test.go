package accounts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/internal/hiddenchar"
)

func org(members ...actors.Member) *actors.OrgState {
	st := actors.NewOrgState("org_1", "Acme", "launch", time.Unix(0, 0))
	st.Members = members
	return st
}

var (
	t0      = time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	gone    = t0.Add(-time.Hour)
	owner1  = actors.Member{ID: "o1", Role: actors.RoleOwner}
	owner2  = actors.Member{ID: "o2", Role: actors.RoleOwner}
	admin1  = actors.Member{ID: "a1", Role: actors.RoleAdmin}
	admin2  = actors.Member{ID: "a2", Role: actors.RoleAdmin}
	member1 = actors.Member{ID: "m1", Role: actors.RoleMember}
	exOwner = actors.Member{ID: "x1", Role: actors.RoleOwner, RemovedAt: &gone}
)

func TestRoleChangeRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []actors.Member
		by, tgt string
		to      actors.Role
		want    error
	}{
		{"owner promotes a member to owner", []actors.Member{owner1, member1}, "o1", "m1", actors.RoleOwner, nil},
		{"owner demotes another owner", []actors.Member{owner1, owner2}, "o1", "o2", actors.RoleMember, nil},
		{"owner demotes themselves while another owner stays", []actors.Member{owner1, owner2}, "o1", "o1", actors.RoleAdmin, nil},
		{"the last owner cannot demote themselves", []actors.Member{owner1, admin1}, "o1", "o1", actors.RoleAdmin, ErrLastOwner},
		{"a removed owner does not count", []actors.Member{owner1, exOwner, member1}, "o1", "o1", actors.RoleMember, ErrLastOwner},
		{"admin promotes a member to admin", []actors.Member{owner1, admin1, member1}, "a1", "m1", actors.RoleAdmin, nil},
		{"admin demotes another admin", []actors.Member{owner1, admin1, admin2}, "a1", "a2", actors.RoleMember, nil},
		{"admin may not grant owner", []actors.Member{owner1, admin1, member1}, "a1", "m1", actors.RoleOwner, ErrRoleForbidden},
		{"admin may not demote an owner", []actors.Member{owner1, owner2, admin1}, "a1", "o1", actors.RoleMember, ErrRoleForbidden},
		{"member changes no role", []actors.Member{owner1, member1}, "m1", "m1", actors.RoleAdmin, ErrRoleForbidden},
		{"a removed member changes nothing", []actors.Member{owner1, exOwner, member1}, "x1", "m1", actors.RoleAdmin, ErrRoleForbidden},
		{"unknown target", []actors.Member{owner1}, "o1", "nobody", actors.RoleAdmin, ErrNoSuchMember},
		{"removed target", []actors.Member{owner1, exOwner}, "o1", "x1", actors.RoleAdmin, ErrNoSuchMember},
		{"unknown role", []actors.Member{owner1, member1}, "o1", "m1", actors.Role("root"), ErrRoleForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := org(tc.members...)
			before := append([]actors.Member(nil), st.Members...)
			err := ChangeRole(st, tc.by, tc.tgt, tc.to)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			for i, m := range st.Members {
				switch {
				case err == nil && m.ID == tc.tgt:
					if m.Role != tc.to {
						t.Fatalf("role not changed: %+v", m)
					}
				case m.Role != before[i].Role:
					t.Fatalf("%s changed from %s to %s", m.ID, before[i].Role, m.Role)
				}
			}
		})
	}
}

func TestRemovalRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []actors.Member
		by, tgt string
		want    error
	}{
		{"owner removes an admin", []actors.Member{owner1, admin1}, "o1", "a1", nil},
		{"owner removes another owner", []actors.Member{owner1, owner2}, "o1", "o2", nil},
		{"the last owner cannot leave", []actors.Member{owner1, admin1}, "o1", "o1", ErrLastOwner},
		{"an owner leaves while another stays", []actors.Member{owner1, owner2}, "o2", "o2", nil},
		{"admin removes a member", []actors.Member{owner1, admin1, member1}, "a1", "m1", nil},
		{"admin may not remove an owner", []actors.Member{owner1, owner2, admin1}, "a1", "o2", ErrRoleForbidden},
		{"member may not remove others", []actors.Member{owner1, admin1, member1}, "m1", "a1", ErrRoleForbidden},
		{"member leaves", []actors.Member{owner1, member1}, "m1", "m1", nil},
		{"removed twice", []actors.Member{owner1, exOwner}, "o1", "x1", ErrNoSuchMember},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := org(tc.members...)
			err := RemoveMember(st, tc.by, tc.tgt, t0)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			for _, m := range st.Members {
				removedNow := m.RemovedAt != nil && m.RemovedAt.Equal(t0)
				if removedNow != (err == nil && m.ID == tc.tgt) {
					t.Fatalf("member %s removed=%v after %v", m.ID, removedNow, err)
				}
			}
		})
	}
}

func TestOrgNameAndNewOrganization(t *testing.T) {
	for _, bad := range []string{"", "   ", "a\x00b", "line\nbreak", strings.Repeat("é", 101)} {
		if _, err := OrgName(bad); !errors.Is(err, ErrBadOrgName) {
			t.Fatalf("%q: %v", bad, err)
		}
	}
	// A character that shows nothing or reorders text is refused, naming it; the joiners written words need
	// are kept.
	for bad, r := range map[string]rune{"Acme\u202egnp.exe": 0x202e, "Ac\u200bme": 0x200b, "\ufeffAcme": 0xfeff,
		"Acme\u2028Labs": 0x2028, "Acme\u2066Labs": 0x2066, "Acme\ue000": 0xe000, "Acme\u00adLabs": 0xad} {
		var h *hiddenchar.Error
		if _, err := OrgName(bad); !errors.Is(err, ErrBadOrgName) || !errors.As(err, &h) || h.Rune != r {
			t.Errorf("%+q: %v, want a hiddenchar.Error for %U", bad, err, r)
		}
	}
	for _, good := range []string{"می\u200cخواهم", "Café Ünïcode", "東京\u3000スタジオ", "👩\u200d💻 Labs"} {
		if n, err := OrgName(good); err != nil || n != good {
			t.Errorf("%+q: %q, %v", good, n, err)
		}
	}
	st, err := NewOrganization("org_2", "  Acme Labs ", "launch", "mem_9", "ada@example.com", t0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Name != "Acme Labs" || st.Balance != 0 || len(st.Members) != 1 || st.Members[0].Role != actors.RoleOwner || st.Members[0].ID != "mem_9" {
		t.Fatalf("new organization: %+v", st)
	}
}

// TestMembershipsAndSwitch: a user in two organizations switches the session between them; a session
// cannot switch to an organization the user is not in; the bound on memberships holds.
func TestMembershipsAndSwitch(t *testing.T) {
	ctx := context.Background()
	a, _ := newTestAccounts(t)
	u, err := a.CreateUser(ctx, "o@example.com", pw, "org_1", "mem_1")
	if err != nil {
		t.Fatal(err)
	}
	secret, s, _, err := a.SignIn(ctx, "o@example.com", pw)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Active(u); got != (Membership{OrgID: "org_1", MemberID: "mem_1"}) {
		t.Fatalf("first membership: %+v", got)
	}
	if _, err := a.SwitchOrg(ctx, secret, "org_2"); !errors.Is(err, ErrNotMember) {
		t.Fatalf("switch to a stranger's organization: %v", err)
	}
	if u, err = a.AddMembership(ctx, u.ID, Membership{OrgID: "org_2", MemberID: "mem_2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SwitchOrg(ctx, secret, "org_2"); err != nil {
		t.Fatal(err)
	}
	s, u, err = a.Session(ctx, secret)
	if err != nil || s.Active(u) != (Membership{OrgID: "org_2", MemberID: "mem_2"}) {
		t.Fatalf("after the switch: %+v %v", s, err)
	}
	// Another session of the same user is not switched.
	other, s2, _, err := a.SignIn(ctx, "o@example.com", pw)
	if err != nil || other == secret || s2.Active(u).OrgID != "org_1" {
		t.Fatalf("a fresh session: %+v %v", s2, err)
	}
	// Adding it again is a no-op; the bound counts distinct organizations.
	if u, err = a.AddMembership(ctx, u.ID, Membership{OrgID: "org_2", MemberID: "mem_2"}); err != nil || len(u.All()) != 2 {
		t.Fatalf("again: %d %v", len(u.All()), err)
	}
	for i := len(u.All()); i < MaxMemberships; i++ {
		if u, err = a.AddMembership(ctx, u.ID, Membership{OrgID: "org_x" + string(rune('a'+i)), MemberID: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := u.CanAddMembership(); !errors.Is(err, ErrTooManyOrgs) {
		t.Fatalf("at the bound: %v", err)
	}
	if _, err := a.AddMembership(ctx, u.ID, Membership{OrgID: "org_more", MemberID: "m"}); !errors.Is(err, ErrTooManyOrgs) {
		t.Fatalf("past the bound: %v", err)
	}
	// A password change ends the switched session too.
	if _, _, err := a.ChangePassword(ctx, u.ID, pw, "another long password"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SwitchOrg(ctx, secret, "org_1"); !errors.Is(err, ErrNoSession) {
		t.Fatalf("switch after a password change: %v", err)
	}
}

// TestOwnersDemotingEachOtherAtOnce: two owners demote each other at the same moment through the
// organization record's compare-and-set update (as the console does); the rules run against what the
// winning write left, so the organization keeps an owner and exactly one change is applied.
func TestOwnersDemotingEachOtherAtOnce(t *testing.T) {
	a, clk := newTestAccounts(t)
	orgs := actors.Orgs{Store: a.Store, Clock: clk}
	ctx := context.Background()
	for round := 0; round < 20; round++ {
		st := org(owner1, owner2, member1)
		st.ID = fmt.Sprintf("org_race%d", round)
		if err := orgs.Create(ctx, st); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 2)
		start := make(chan struct{})
		for _, p := range [][2]string{{"o1", "o2"}, {"o2", "o1"}} {
			go func() {
				<-start
				_, err := orgs.Update(ctx, st.ID, func(s *actors.OrgState) error { return ChangeRole(s, p[0], p[1], actors.RoleMember) })
				errs <- err
			}()
		}
		close(start)
		var ok, refused int
		for range 2 {
			switch err := <-errs; {
			case err == nil:
				ok++
			case errors.Is(err, ErrRoleForbidden):
				refused++
			default:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		got, _, err := orgs.Load(ctx, st.ID)
		if err != nil {
			t.Fatal(err)
		}
		if ok != 1 || refused != 1 || activeOwners(got.Members) != 1 {
			t.Fatalf("round %d: %d applied, %d refused, %d owners left", round, ok, refused, activeOwners(got.Members))
		}
	}
}

// TestJoinRules: who may accept an invitation with an account they already have.
func TestJoinRules(t *testing.T) {
	ada := &User{ID: "usr_ada", Email: "ada@example.com", OrgID: "org_home", MemberID: "h1"}
	inv := &Invite{OrgID: "org_1", Email: "ada@example.com", Role: "member"}
	full := &User{ID: "usr_full", Email: "ada@example.com", OrgID: "org_home", MemberID: "h1"}
	for i := 1; i < MaxMemberships; i++ {
		full.Memberships = append(full.Memberships, Membership{OrgID: fmt.Sprintf("org_x%d", i), MemberID: "x"})
	}
	nearlyFull := &User{ID: "usr_nf", Email: "ada@example.com", OrgID: "org_home", MemberID: "h1", Memberships: full.Memberships[1:]}
	// Removed from org_1 once (member x1, removed), then invited again.
	removed := &User{ID: "usr_r", Email: "ada@example.com", OrgID: "org_home", MemberID: "h1",
		Memberships: append(append([]Membership(nil), full.Memberships[1:]...), Membership{OrgID: "org_1", MemberID: "x1"})}
	inOrg := &User{ID: "usr_in", Email: "ada@example.com", OrgID: "org_1", MemberID: "m1"}
	for _, tc := range []struct {
		name    string
		u       *User
		members []actors.Member
		want    error
	}{
		{"a person of another organization joins", ada, []actors.Member{owner1}, nil},
		{"another email cannot use the link", &User{ID: "usr_eve", Email: "eve@example.com", OrgID: "org_home", MemberID: "h1"}, []actors.Member{owner1}, ErrWrongAccount},
		{"an active member already", inOrg, []actors.Member{owner1, member1}, ErrAlreadyMember},
		{"twenty organizations already", full, []actors.Member{owner1}, ErrTooManyOrgs},
		{"nineteen organizations: one more", nearlyFull, []actors.Member{owner1}, nil},
		{"removed once, invited again (replaces, even at twenty)", removed, []actors.Member{owner1, exOwner}, nil},
	} {
		if err := CheckJoin(inv, tc.u, tc.members); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := CheckInviteExisting(inOrg, "org_1", []actors.Member{owner1, member1}); !errors.Is(err, ErrAlreadyMember) {
		t.Errorf("invite an active member: %v", err)
	}
	if err := CheckInviteExisting(ada, "org_1", []actors.Member{owner1}); err != nil {
		t.Errorf("invite a person of another organization: %v", err)
	}
}

// TestAddMembershipReplacesRemoved: a person removed from an organization and invited again gets the new
// member id there, not a second membership.
func TestAddMembershipReplacesRemoved(t *testing.T) {
	ctx := context.Background()
	a, _ := newTestAccounts(t)
	u, err := a.CreateUser(ctx, "ada@example.com", pw, "org_home", "h1")
	if err != nil {
		t.Fatal(err)
	}
	if u, err = a.AddMembership(ctx, u.ID, Membership{OrgID: "org_1", MemberID: "x1"}); err != nil {
		t.Fatal(err)
	}
	if u, err = a.AddMembership(ctx, u.ID, Membership{OrgID: "org_1", MemberID: "m2"}); err != nil {
		t.Fatal(err)
	}
	if m, _ := u.In("org_1"); m.MemberID != "m2" || len(u.All()) != 2 {
		t.Fatalf("memberships after the second invitation: %+v", u.All())
	}
}
