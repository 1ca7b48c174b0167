package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/internal/clock"
	"filigrane/internal/node"
)

func runOK(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("filigrane %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
	}
	return out.String()
}

func TestAdminLifecycle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := runOK(t, "admin", "--data", dir, "org", "create", "--name", "Acme", "--plan", "growth", "--credits", "40")
	org := regexp.MustCompile(`org_[0-9a-f]{16}`).FindString(out)
	if org == "" || !strings.Contains(out, "with 40 credits") {
		t.Fatalf("org create: %q", out)
	}
	out = runOK(t, "admin", "--data", dir, "member", "add", "--org", org, "--name", "Alice", "--role", "admin")
	mem := regexp.MustCompile(`mem_[0-9a-f]{16}`).FindString(out)
	out = runOK(t, "admin", "--data", dir, "key", "create", "--org", org, "--member", mem, "--scopes", "watermarks:embed,assets:read", "--expires", "24h")
	secret := regexp.MustCompile(`fgk_([0-9a-f]{16})_\S+`).FindStringSubmatch(out)
	if secret == nil {
		t.Fatalf("key create printed no secret: %q", out)
	}
	list := runOK(t, "admin", "--data", dir, "key", "list", "--org", org)
	if !strings.Contains(list, secret[1]) || strings.Contains(list, secret[0]) {
		t.Fatalf("key list must show the id and never the secret: %q", list)
	}
	runOK(t, "admin", "--data", dir, "key", "revoke", "--key", secret[1])
	if list := runOK(t, "admin", "--data", dir, "key", "list", "--org", org); strings.Count(list, "\n") != 2 || strings.HasSuffix(strings.TrimSpace(list), "-") {
		t.Fatalf("revoked key not shown as revoked: %q", list)
	}
	runOK(t, "admin", "--data", dir, "credits", "grant", "--org", org, "--amount", "10", "--op", "inv-1")
	runOK(t, "admin", "--data", dir, "credits", "grant", "--org", org, "--amount", "10", "--op", "inv-1")
	show := runOK(t, "admin", "--data", dir, "credits", "show", "--org", org)
	if !strings.Contains(show, "balance 50") {
		t.Fatalf("an idempotent grant counted twice or not at all: %q", show)
	}
	if orgs := runOK(t, "admin", "--data", dir, "org", "list"); !strings.Contains(orgs, org) || !strings.Contains(orgs, "growth") {
		t.Fatalf("org list: %q", orgs)
	}
}

func TestAdminErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := [][]string{
		{"admin", "--data", dir, "org", "create", "--name", "X", "--plan", "platinum"},
		{"admin", "--data", dir, "org", "create", "--plan", "trial"},
		{"admin", "--data", dir, "member", "add", "--org", "org_0000000000000000", "--name", "A"},
		{"admin", "--data", dir, "key", "create", "--org", "org_0000000000000000", "--member", "mem_x"},
		{"admin", "--data", dir, "frob", "nicate"},
	}
	for _, args := range cases {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code == 0 || errb.Len() == 0 {
			t.Fatalf("filigrane %s: exit %d, stderr %q; want a failure with a message", strings.Join(args[3:], " "), code, errb.String())
		}
	}
	// An organization name with a right-to-left override (shown as "Acmeexe.png") is refused as the console
	// refuses it, naming the character; nothing is created.
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"admin", "--data", dir, "org", "create", "--name", "Acme\u202egnp.exe", "--plan", "growth"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "U+202E") || strings.Contains(runOK(t, "admin", "--data", dir, "org", "list"), "Acme") {
		t.Fatalf("org create with U+202E: exit %d: %s", code, errb.String())
	}
	// So are a member's and a key's name (internal/hiddenchar), before anything is written.
	org := regexp.MustCompile(`org_[0-9a-f]{16}`).FindString(runOK(t, "admin", "--data", dir, "org", "create", "--name", "Plain", "--plan", "growth"))
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"admin", "--data", dir, "member", "add", "--org", org, "--name", "Ada\u200b"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "U+200B") || !strings.HasSuffix(strings.TrimSpace(runOK(t, "admin", "--data", dir, "org", "list")), "0") {
		t.Fatalf("member add with U+200B: exit %d: %s", code, errb.String())
	}
	mem := regexp.MustCompile(`mem_[0-9a-f]{16}`).FindString(runOK(t, "admin", "--data", dir, "member", "add", "--org", org, "--name", "Ada"))
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"admin", "--data", dir, "key", "create", "--org", org, "--member", mem, "--name", "ci\u202egnp.exe"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "U+202E") || strings.Contains(out.String(), "fgk_") || strings.Count(runOK(t, "admin", "--data", dir, "key", "list", "--org", org), "\n") != 1 {
		t.Fatalf("key create with U+202E: exit %d: %s %s", code, out.String(), errb.String())
	}
	// An organization named before that rule is listed with the character written as an escape, so it neither
	// reverses nor splits the line in a terminal.
	storage, err := node.OpenStorage(context.Background(), dir, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	_, err = actors.Orgs{Store: storage.Store, Clock: clock.System{}}.Update(context.Background(), org, func(st *actors.OrgState) error {
		st.Name = "Plain\u202eowner\tx"
		return nil
	})
	storage.Close()
	if err != nil {
		t.Fatal(err)
	}
	if list := runOK(t, "admin", "--data", dir, "org", "list"); !strings.Contains(list, `Plain\u202eowner\tx`) || strings.Contains(list, "\u202e") {
		t.Fatalf("org list of a name from before the rule: %q", list)
	}
}

// TestAdminWithoutStore: with no --data and no store in the default directory, admin says what is missing
// and creates nothing.
func TestAdminWithoutStore(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("FILIGRANE_DATA", "")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"admin", "org", "list"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "no Filigrane store in ./data") || !strings.Contains(errb.String(), "--data") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if _, err := os.Stat("data"); !os.IsNotExist(err) {
		t.Fatalf("admin created ./data: %v", err)
	}
}

func TestServeRefusesMalformedLimits(t *testing.T) {
	t.Setenv("FILIGRANE_HEADER_TIMEOUT", "ten seconds")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"serve", "--data", t.TempDir()}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "FILIGRANE_HEADER_TIMEOUT") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

func TestAdminUserCreate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := runOK(t, "admin", "--data", dir, "org", "create", "--name", "Acme", "--plan", "growth")
	org := regexp.MustCompile(`org_[0-9a-f]{16}`).FindString(out)
	out = runOK(t, "admin", "--data", dir, "member", "add", "--org", org, "--name", "Alice", "--role", "owner")
	mem := regexp.MustCompile(`mem_[0-9a-f]{16}`).FindString(out)
	out = runOK(t, "admin", "--data", dir, "user", "create", "--org", org, "--member", mem, "--email", "Alice@Example.com")
	pw := regexp.MustCompile(`password \(shown once, store it now\): (\S{12,})`).FindStringSubmatch(out)
	if pw == nil || !strings.Contains(out, "alice@example.com") {
		t.Fatalf("user create: %q", out)
	}
	if list := runOK(t, "admin", "--data", dir, "user", "list"); !strings.Contains(list, "alice@example.com") || strings.Contains(list, pw[1]) {
		t.Fatalf("user list: %q", list)
	}
	out = runOK(t, "admin", "--data", dir, "user", "password", "--email", "alice@example.com")
	if pw2 := regexp.MustCompile(`password \(shown once, store it now\): (\S{12,})`).FindStringSubmatch(out); pw2 == nil || pw2[1] == pw[1] {
		t.Fatalf("user password: %q", out)
	}
	// The email is taken now; an unknown member has no user.
	var o, e bytes.Buffer
	if code := run(context.Background(), []string{"admin", "--data", dir, "user", "create", "--org", org, "--member", mem, "--email", "alice@example.com"}, &o, &e); code == 0 || !strings.Contains(e.String(), "email exists") {
		t.Fatalf("second user with one email: exit %d %q", code, e.String())
	}
	if code := run(context.Background(), []string{"admin", "--data", dir, "user", "create", "--org", org, "--member", "mem_0000000000000000", "--email", "b@example.com"}, &o, &e); code == 0 {
		t.Fatal("a user for an unknown member was created")
	}
}

// TestReadPassword: --password-stdin takes the first line without its ending, and refuses an empty one.
func TestReadPassword(t *testing.T) {
	for in, want := range map[string]string{"s3cret pass\n": "s3cret pass", "s3cret\r\nsecond line\n": "s3cret", "no newline": "no newline"} {
		if got, err := readPassword(strings.NewReader(in)); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "\n", "\r\n"} {
		if _, err := readPassword(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), "empty password") {
			t.Errorf("%q: %v, want the empty password refused", in, err)
		}
	}
}
