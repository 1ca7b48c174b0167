package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/internal/admin"
	"filigrane/internal/clock"
	"filigrane/internal/hiddenchar"
	"filigrane/internal/node"
)

const adminUsage = `usage: filigrane admin [--data DIR] [--plans FILE] <command> [flags]   (--data, --plans, --s3-* may also follow)

Works on the data directory of a STOPPED node, or with --s3-endpoint on a cluster's shared store while the
cluster runs (every write is a compare-and-set, so a running organization actor reloads instead of losing it).

  org create --name NAME --plan PLAN [--credits N]   create an organization (prints its id)
  org list                                           list organizations with plan and balance
  member add --org ORG --name NAME --role ROLE       add a member (owner, admin, member); prints its id
  member remove --org ORG --member MEMBER            remove a member (their keys stop working)
  key create --org ORG --member MEMBER [--name N] [--scopes all|s1,s2] [--expires 720h]
                                                     create an API key; the secret is printed once
  key list --org ORG                                 list keys (never secrets)
  key revoke --key KEY_ID                            revoke a key
  credits grant --org ORG --amount N [--op ID]       add credits (idempotent by --op)
  credits show --org ORG [--ledger N]                balance, holds and the last N ledger entries
  user create --org ORG --member MEMBER --email EMAIL [--password-stdin]
                                                     create a web console user for a member; without
                                                     --password-stdin a password is generated and printed once
  user password --email EMAIL [--password-stdin]     reset a console user's password (printed once when generated),
                                                     unlock the account and end its sessions
  user list                                          list console users
`

func runAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("admin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, adminUsage) }
	dataDir := fs.String("data", envOr("FILIGRANE_DATA", "./data"), "node data directory")
	plans := fs.String("plans", "", "plan catalog file (JSON); defaults built in")
	s3 := s3Flags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	if len(rest) < 2 {
		fs.Usage()
		return 2
	}
	// The admin-wide flags (--data, --plans, --s3-*) are also read after the command, where people put
	// them (`admin key list --org ORG --data DIR`): left there, the store of ./data would be opened instead.
	cmdArgs, adminArgs := splitAdminFlags(fs, rest[2:])
	if err := fs.Parse(adminArgs); err != nil {
		return 2
	}
	rest = append(rest[:2:2], cmdArgs...)
	catalog, err := actors.LoadCatalog(*plans)
	if err != nil {
		fmt.Fprintln(stderr, "filigrane admin:", err)
		return 1
	}
	s3cfg := s3()
	if s3cfg != nil {
		// The shared store is the cluster's; the node-local store of this command is a throwaway, so that
		// admin never contends with a node running on the same machine.
		tmp, err := os.MkdirTemp("", "filigrane-admin-")
		if err != nil {
			fmt.Fprintln(stderr, "filigrane admin:", err)
			return 1
		}
		defer os.RemoveAll(tmp)
		*dataDir = tmp
	}
	explicit := os.Getenv("FILIGRANE_DATA") != ""
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "data" })
	if s3cfg == nil && !explicit {
		// Without --data, opening the default directory when it holds no store would create an empty one,
		// and commands would then "succeed" on an organization no node serves. A named directory may be new:
		// an operator can prepare organizations before a node's first start.
		if _, err := os.Stat(node.Layout{Root: *dataDir}.StoreDir()); err != nil {
			fmt.Fprintf(stderr, "filigrane admin: no Filigrane store in %s (%v).\n"+
				"Name the stopped node's data directory with --data DIR (or FILIGRANE_DATA), or a cluster's shared store with --s3-endpoint.\n",
				*dataDir, err)
			return 1
		}
	}
	storage, err := node.OpenStorage(ctx, *dataDir, s3cfg, zerolog.Nop())
	if err != nil {
		fmt.Fprintf(stderr, "filigrane admin: %v\n", err)
		return 1
	}
	defer storage.Close()
	a := admin.Admin{Store: storage.Store, Clock: clock.System{}, Catalog: catalog}
	if err := adminCommand(ctx, a, rest[0]+" "+rest[1], rest[2:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 2
		}
		fmt.Fprintln(stderr, "filigrane admin:", err)
		return 1
	}
	return 0
}

// splitAdminFlags takes the flags fs defines (all of them take a value) out of a command's arguments and
// returns the command's own arguments and those flags. A flag of the command other than --password-stdin
// takes a value, which is kept with it, so a value that looks like an admin flag stays the command's.
func splitAdminFlags(fs *flag.FlagSet, args []string) (cmdArgs, adminArgs []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") {
			cmdArgs = append(cmdArgs, args[i:]...)
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		takesNext := !hasValue && i+1 < len(args)
		switch {
		case fs.Lookup(name) != nil:
			adminArgs = append(adminArgs, a)
			if takesNext {
				i++
				adminArgs = append(adminArgs, args[i])
			}
		default:
			cmdArgs = append(cmdArgs, a)
			if takesNext && name != "password-stdin" && name != "h" && name != "help" {
				i++
				cmdArgs = append(cmdArgs, args[i])
			}
		}
	}
	return cmdArgs, adminArgs
}

func adminCommand(ctx context.Context, a admin.Admin, cmd string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("admin "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	org := fs.String("org", "", "organization id")
	name := fs.String("name", "", "name")
	plan := fs.String("plan", "", "plan name")
	credits := fs.Int64("credits", 0, "extra credits on creation")
	role := fs.String("role", "member", "member role")
	member := fs.String("member", "", "member id")
	scopes := fs.String("scopes", "all", "comma-separated scopes, or all")
	expires := fs.Duration("expires", 0, "key lifetime (0: never expires)")
	keyID := fs.String("key", "", "key id")
	amount := fs.Int64("amount", 0, "credits")
	op := fs.String("op", "", "operation id (makes a grant idempotent)")
	ledger := fs.Int("ledger", 20, "ledger entries to show")
	email := fs.String("email", "", "console user's email")
	pwStdin := fs.Bool("password-stdin", false, "read the console user's password from the first line of standard input")
	if err := fs.Parse(args); err != nil {
		return err
	}
	need := func(v, flagName string) error {
		if v == "" {
			return fmt.Errorf("%s needs --%s", cmd, flagName)
		}
		return nil
	}
	switch cmd {
	case "org create":
		if err := errors.Join(need(*name, "name"), need(*plan, "plan")); err != nil {
			return err
		}
		st, err := a.CreateOrg(ctx, *name, *plan, *credits)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "organization %s created on plan %s with %d credits\n", st.ID, st.Plan, st.Balance)
	case "org list":
		orgs, err := a.ListOrgs(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tPLAN\tBALANCE\tHELD\tMEMBERS")
		for _, o := range orgs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\n", o.ID, hiddenchar.Escape(o.Name), o.Plan, o.Balance, o.Held(), len(o.Members))
		}
		return tw.Flush()
	case "member add":
		if err := errors.Join(need(*org, "org"), need(*name, "name")); err != nil {
			return err
		}
		r, err := actors.ParseRole(*role)
		if err != nil {
			return err
		}
		id, err := a.AddMember(ctx, *org, *name, r)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "member %s added to %s as %s\n", id, *org, r)
	case "member remove":
		if err := errors.Join(need(*org, "org"), need(*member, "member")); err != nil {
			return err
		}
		if err := a.RemoveMember(ctx, *org, *member); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "member %s removed from %s\n", *member, *org)
	case "key create":
		if err := errors.Join(need(*org, "org"), need(*member, "member")); err != nil {
			return err
		}
		list := actors.AllScopes()
		if *scopes != "all" {
			list = strings.Split(*scopes, ",")
		}
		spec := actors.NewKeySpec{OrgID: *org, MemberID: *member, Name: *name, Scopes: list}
		if *expires > 0 {
			t := a.Clock.Now().Add(*expires)
			spec.ExpiresAt = &t
		}
		secret, key, err := a.CreateKey(ctx, spec)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "key %s created with scopes %s\n", key.ID, strings.Join(key.Scopes, ","))
		fmt.Fprintf(stdout, "secret (shown once, store it now): %s\n", secret)
	case "key list":
		if err := need(*org, "org"); err != nil {
			return err
		}
		keys, err := a.ListKeys(ctx, *org)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tNAME\tMEMBER\tSCOPES\tCREATED\tEXPIRES\tREVOKED")
		for _, k := range keys {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, hiddenchar.Escape(k.Name), k.MemberID, strings.Join(k.Scopes, ","),
				k.CreatedAt.Format(time.RFC3339), timeOrDash(k.ExpiresAt), timeOrDash(k.RevokedAt))
		}
		return tw.Flush()
	case "key revoke":
		if err := need(*keyID, "key"); err != nil {
			return err
		}
		k, err := a.RevokeKey(ctx, *keyID)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "key %s revoked at %s\n", k.ID, k.RevokedAt.Format(time.RFC3339))
	case "credits grant":
		if err := need(*org, "org"); err != nil {
			return err
		}
		st, err := a.Grant(ctx, *org, *amount, *op)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "organization %s balance %d (available %d)\n", st.ID, st.Balance, st.Available())
	case "credits show":
		if err := need(*org, "org"); err != nil {
			return err
		}
		st, entries, err := a.Balance(ctx, *org, *ledger)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "organization %s (%s) plan %s\nbalance %d  held %d  available %d\n",
			st.ID, hiddenchar.Escape(st.Name), st.Plan, st.Balance, st.Held(), st.Available())
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SEQ\tAT\tKIND\tAMOUNT\tBALANCE\tHELD\tOPERATION")
		for _, e := range entries {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%s\n", e.Seq, e.At.Format(time.RFC3339), e.Kind, e.Amount, e.Balance, e.Held, e.Operation)
		}
		return tw.Flush()
	case "user create":
		if err := errors.Join(need(*org, "org"), need(*member, "member"), need(*email, "email")); err != nil {
			return err
		}
		password := ""
		if *pwStdin {
			var err error
			if password, err = readPassword(os.Stdin); err != nil {
				return err
			}
		}
		u, pw, err := a.CreateUser(ctx, *org, *member, *email, password)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "console user %s (%s) created for member %s of %s\n", u.ID, u.Email, u.MemberID, u.OrgID)
		if password == "" {
			fmt.Fprintf(stdout, "password (shown once, store it now): %s\n", pw)
		}
	case "user password":
		if err := need(*email, "email"); err != nil {
			return err
		}
		password := ""
		if *pwStdin {
			var err error
			if password, err = readPassword(os.Stdin); err != nil {
				return err
			}
		}
		u, pw, err := a.ResetPassword(ctx, *email, password)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "password of %s (%s) reset; its sessions ended\n", u.Email, u.ID)
		if password == "" {
			fmt.Fprintf(stdout, "password (shown once, store it now): %s\n", pw)
		}
	case "user list":
		users, err := a.ListUsers(ctx, 10000)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "USER\tEMAIL\tORG\tMEMBER\tCREATED")
		for _, u := range users {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", u.ID, hiddenchar.Escape(u.Email), u.OrgID, u.MemberID, u.CreatedAt.Format(time.RFC3339))
		}
		return tw.Flush()
	default:
		fmt.Fprint(stderr, adminUsage)
		return fmt.Errorf("unknown command %q", cmd)
	}
	return nil
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

// readPassword reads the password of --password-stdin: the first line of r (at most 4 KiB), without its line
// ending. An empty one is refused: a generated password is asked for by leaving the flag out.
func readPassword(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the password: %w", err)
	}
	password := strings.TrimRight(line, "\r\n")
	if password == "" {
		return "", errors.New("--password-stdin read an empty password")
	}
	return password, nil
}
