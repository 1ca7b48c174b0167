package accounts

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/internal/clock"
	"filigrane/internal/hiddenchar"
	"filigrane/persistence/pebblestore"
)

func newTestAccounts(t *testing.T) (*Accounts, *clock.Manual) {
	t.Helper()
	st, err := pebblestore.Open(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	clk := clock.NewManual(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC))
	a := New(st, clk, Policy{}, 2)
	a.Argon2 = Argon2{Time: 1, MemKiB: 64, Threads: 1} // fast in tests; the default is checked below
	return a, clk
}

const pw = "correct horse battery"

func TestSignInAndSession(t *testing.T) {
	ctx := context.Background()
	a, clk := newTestAccounts(t)
	u, err := a.CreateUser(ctx, "  Owner@Example.COM ", pw, "org_1", "mem_1")
	if err != nil {
		t.Fatal(err)
	}
	if u.Email != "owner@example.com" || len(u.Hash) != 32 || string(u.Hash) == pw {
		t.Fatalf("stored user %+v", u)
	}
	if _, err := a.CreateUser(ctx, "owner@example.com", pw, "org_1", "mem_2"); !errors.Is(err, ErrEmailTaken) {
		t.Fatalf("second user with the same email: %v", err)
	}
	if _, err := a.CreateUser(ctx, "x@example.com", "short", "org_1", "mem_2"); !errors.Is(err, ErrWeakPassword) {
		t.Fatalf("short password: %v", err)
	}
	if _, err := a.CreateUser(ctx, "not-an-email", pw, "org_1", "mem_2"); !errors.Is(err, ErrBadEmail) {
		t.Fatalf("bad email: %v", err)
	}
	if _, _, _, err := a.SignIn(ctx, "nobody@example.com", pw); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("unknown email: %v", err)
	}
	secret, s, _, err := a.SignIn(ctx, "OWNER@example.com", pw)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.CSRF) < 40 || secret == s.CSRF {
		t.Fatalf("session %+v", s)
	}
	got, gu, err := a.Session(ctx, secret)
	if err != nil || gu.ID != u.ID || got.CSRF != s.CSRF {
		t.Fatalf("session lookup: %v %+v", err, got)
	}
	// Idle expiry: used within the idle timeout it lives on, left idle it ends.
	clk.Advance(90 * time.Minute)
	if _, _, err := a.Session(ctx, secret); err != nil {
		t.Fatalf("after 90 min of use: %v", err)
	}
	clk.Advance(2 * time.Hour)
	if _, _, err := a.Session(ctx, secret); !errors.Is(err, ErrNoSession) {
		t.Fatalf("after 2 h idle: %v", err)
	}
	// Absolute expiry: kept busy, it still ends 12 h after sign-in.
	secret, _, _, err = a.SignIn(ctx, "owner@example.com", pw)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 11; i++ {
		clk.Advance(time.Hour)
		if _, _, err := a.Session(ctx, secret); err != nil {
			t.Fatalf("busy session at hour %d: %v", i+1, err)
		}
	}
	clk.Advance(time.Hour)
	if _, _, err := a.Session(ctx, secret); !errors.Is(err, ErrNoSession) {
		t.Fatalf("after 12 h: %v", err)
	}
	// Sign out ends the session.
	secret, _, _, _ = a.SignIn(ctx, "owner@example.com", pw)
	if err := a.SignOut(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Session(ctx, secret); !errors.Is(err, ErrNoSession) {
		t.Fatalf("after sign-out: %v", err)
	}
}

func TestLockout(t *testing.T) {
	ctx := context.Background()
	a, clk := newTestAccounts(t)
	if _, err := a.CreateUser(ctx, "o@example.com", pw, "org_1", "mem_1"); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		if _, _, _, err := a.SignIn(ctx, "o@example.com", "wrong password!"); !errors.Is(err, ErrBadCredentials) {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	_, _, _, err := a.SignIn(ctx, "o@example.com", "wrong password!")
	var le *LockedError
	if !errors.As(err, &le) || !le.Until.Equal(clk.Now().Add(15*time.Minute)) {
		t.Fatalf("fifth failure: %v", err)
	}
	// Locked: the right password is refused too.
	if _, _, _, err := a.SignIn(ctx, "o@example.com", pw); !errors.Is(err, ErrLocked) {
		t.Fatalf("right password while locked: %v", err)
	}
	clk.Advance(15 * time.Minute)
	if _, _, _, err := a.SignIn(ctx, "o@example.com", pw); err != nil {
		t.Fatalf("after the lock: %v", err)
	}
	// Failures spread wider than the window do not lock.
	for i := 0; i < 8; i++ {
		if _, _, _, err := a.SignIn(ctx, "o@example.com", "wrong password!"); !errors.Is(err, ErrBadCredentials) || errors.Is(err, ErrLocked) {
			t.Fatalf("spread failure %d: %v", i, err)
		}
		clk.Advance(4 * time.Minute)
	}
}

func TestChangePasswordEndsOtherSessions(t *testing.T) {
	ctx := context.Background()
	a, _ := newTestAccounts(t)
	u, err := a.CreateUser(ctx, "o@example.com", pw, "org_1", "mem_1")
	if err != nil {
		t.Fatal(err)
	}
	other, _, _, _ := a.SignIn(ctx, "o@example.com", pw)
	mine, _, _, _ := a.SignIn(ctx, "o@example.com", pw)
	if _, _, err := a.ChangePassword(ctx, u.ID, "not the password", "a brand new password"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("wrong current password: %v", err)
	}
	fresh, _, err := a.ChangePassword(ctx, u.ID, pw, "a brand new password")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{other, mine} {
		if _, _, err := a.Session(ctx, s); !errors.Is(err, ErrNoSession) {
			t.Fatalf("old session after a password change: %v", err)
		}
	}
	if _, _, err := a.Session(ctx, fresh); err != nil {
		t.Fatalf("fresh session: %v", err)
	}
	if _, _, _, err := a.SignIn(ctx, "o@example.com", pw); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("old password: %v", err)
	}
	if _, _, _, err := a.SignIn(ctx, "o@example.com", "a brand new password"); err != nil {
		t.Fatalf("new password: %v", err)
	}
}

func TestDefaultHashIsArgon2id(t *testing.T) {
	ctx := context.Background()
	a, _ := newTestAccounts(t)
	a.Argon2 = Argon2{}
	u, err := a.CreateUser(ctx, "o@example.com", pw, "org_1", "mem_1")
	if err != nil {
		t.Fatal(err)
	}
	if u.Params != DefaultArgon2 || u.Params.MemKiB < 19*1024 {
		t.Fatalf("params %+v", u.Params)
	}
	if _, _, _, err := a.SignIn(ctx, "o@example.com", pw); err != nil {
		t.Fatal(err)
	}
}

func TestPurgeSessions(t *testing.T) {
	ctx := context.Background()
	a, clk := newTestAccounts(t)
	if _, err := a.CreateUser(ctx, "o@example.com", pw, "org_1", "mem_1"); err != nil {
		t.Fatal(err)
	}
	var old []string
	for i := 0; i < 5; i++ {
		s, _, _, err := a.SignIn(ctx, "o@example.com", pw)
		if err != nil {
			t.Fatal(err)
		}
		old = append(old, s)
	}
	clk.Advance(3 * time.Hour)
	fresh, _, _, err := a.SignIn(ctx, "o@example.com", pw)
	if err != nil {
		t.Fatal(err)
	}
	// Pages of two: the pass resumes where it stopped and ends with nil.
	var start []byte
	total, calls := 0, 0
	for {
		next, n, err := a.PurgeSessions(ctx, start, 2)
		if err != nil {
			t.Fatal(err)
		}
		total += n
		calls++
		if next == nil {
			break
		}
		start = next
	}
	if total != 5 || calls != 4 {
		t.Fatalf("deleted %d in %d calls, want 5 in 4", total, calls)
	}
	items, err := a.Store.Scan(ctx, []byte(prefixSession), nil, 100)
	if err != nil || len(items) != 1 {
		t.Fatalf("sessions left: %d %v", len(items), err)
	}
	if _, _, err := a.Session(ctx, fresh); err != nil {
		t.Fatalf("the live session: %v", err)
	}
}

// TestNewEmailWithHiddenCharacter: an address holding a character that shows nothing or reorders text is
// refused naming it (it would look like another person's address), and no user is made with it; a lookup of
// it finds nobody.
func TestNewEmailWithHiddenCharacter(t *testing.T) {
	ctx := context.Background()
	a, _ := newTestAccounts(t)
	for in, r := range map[string]rune{"ada\u200b@example.com": 0x200b, "ada@exa\u202emple.com": 0x202e,
		"ada\u00a0@example.com": 0xa0, "\u2066ada@example.com": 0x2066, "ada\u200d@example.com": 0x200d} {
		var h *hiddenchar.Error
		if _, err := a.CreateUser(ctx, in, pw, "org_1", "mem_1"); !errors.Is(err, ErrBadEmail) || !errors.As(err, &h) || h.Rune != r {
			t.Errorf("%+q: %v, want a hiddenchar.Error for %U", in, err, r)
		}
		if _, err := a.ByEmail(ctx, in); !errors.Is(err, ErrNotFound) {
			t.Errorf("lookup of %+q: %v", in, err)
		}
	}
	if e, err := NormaliseEmail("Ä@Ö.de"); err != nil || e != "ä@ö.de" {
		t.Fatalf("an address in letters beyond ASCII: %q, %v", e, err)
	}
}

// FuzzNormaliseEmail: whatever a person types, an accepted email is bounded, lower-case, has one @ with text on
// both sides, holds no hidden character, and normalising it again changes nothing (so the email index has one
// key per address).
func FuzzNormaliseEmail(f *testing.F) {
	for _, s := range []string{"a@b", " Owner@Example.COM ", "x", "@", "a@@b", "a b@c", "ä@ö.de", "a@b\n", strings.Repeat("a", 300) + "@b",
		"a\u200b@b", "a@\u202eb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		e, err := NormaliseEmail(in)
		if err != nil {
			if !errors.Is(err, ErrBadEmail) {
				t.Fatalf("error %v is not ErrBadEmail", err)
			}
			return
		}
		if _, hidden := hiddenchar.InAddress(e); hidden || len(e) > MaxEmailLen || strings.Count(e, "@") != 1 || strings.HasPrefix(e, "@") ||
			strings.HasSuffix(e, "@") || e != strings.ToLower(e) {
			t.Fatalf("accepted %q as %q", in, e)
		}
		if again, err := NormaliseEmail(e); err != nil || again != e {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", in, e, again, err)
		}
	})
}

func TestInvitations(t *testing.T) {
	ctx := context.Background()
	a, clk := newTestAccounts(t)
	if _, err := a.CreateUser(ctx, "o@example.com", pw, "org_1", "mem_1"); err != nil {
		t.Fatal(err)
	}
	// A person who has an account may be invited (into another organization; CheckInviteExisting refuses
	// an active member).
	if _, inv, err := a.CreateInvite(ctx, "org_2", "O@example.com", "member", "usr_x"); err != nil || inv.Email != "o@example.com" {
		t.Fatalf("invite an existing user: %+v %v", inv, err)
	}
	token, inv, err := a.CreateInvite(ctx, "org_1", "New@Example.com", "admin", "usr_x")
	if err != nil || inv.Email != "new@example.com" || inv.Role != "admin" {
		t.Fatalf("invite: %+v %v", inv, err)
	}
	if _, _, err := a.LookupInvite(ctx, token+"x"); !errors.Is(err, ErrNoInvite) {
		t.Fatalf("wrong token: %v", err)
	}
	if got, err := a.ClaimInvite(ctx, token); err != nil || got.OrgID != "org_1" {
		t.Fatalf("claim: %+v %v", got, err)
	}
	if _, err := a.ClaimInvite(ctx, token); !errors.Is(err, ErrNoInvite) {
		t.Fatalf("second claim: %v", err)
	}
	// Expiry on the injected clock.
	token, _, err = a.CreateInvite(ctx, "org_1", "later@example.com", "member", "usr_x")
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(InviteTTL)
	if _, err := a.ClaimInvite(ctx, token); !errors.Is(err, ErrNoInvite) {
		t.Fatalf("expired invitation: %v", err)
	}
}

func TestResetPassword(t *testing.T) {
	ctx := context.Background()
	a, _ := newTestAccounts(t)
	if _, err := a.CreateUser(ctx, "o@example.com", pw, "org_1", "mem_1"); err != nil {
		t.Fatal(err)
	}
	old, _, _, _ := a.SignIn(ctx, "o@example.com", pw)
	for i := 0; i < 5; i++ {
		_, _, _, _ = a.SignIn(ctx, "o@example.com", "wrong password!")
	}
	if _, _, _, err := a.SignIn(ctx, "o@example.com", pw); !errors.Is(err, ErrLocked) {
		t.Fatalf("not locked: %v", err)
	}
	if _, err := a.ResetPassword(ctx, "O@example.com", "the operator's choice"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Session(ctx, old); !errors.Is(err, ErrNoSession) {
		t.Fatalf("session after a reset: %v", err)
	}
	if _, _, _, err := a.SignIn(ctx, "o@example.com", "the operator's choice"); err != nil {
		t.Fatalf("after the reset (and unlock): %v", err)
	}
	if _, err := a.ResetPassword(ctx, "nobody@example.com", "the operator's choice"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown email: %v", err)
	}
}
