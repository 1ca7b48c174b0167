// Package admin holds the operator's offline commands on a node's data: organizations, members, API keys and
// credits. The same functions create the development organization on a node's first start.
package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"filigrane/actors"
	"filigrane/internal/accounts"
	"filigrane/internal/clock"
	"filigrane/internal/hiddenchar"
	"filigrane/persistence"
)

// Admin administers organizations directly in the Store. It must not run while a node serves the same data:
// the organization actor owns the record then (a Pebble data directory is locked by the running node).
type Admin struct {
	Store   persistence.Store
	Clock   clock.Clock
	Catalog actors.Catalog
	// PasswordCost is the argon2id cost of console passwords it sets; zero: accounts.DefaultArgon2. Tests
	// lower it.
	PasswordCost accounts.Argon2
}

func (a Admin) orgs() actors.Orgs { return actors.Orgs{Store: a.Store, Clock: a.Clock} }
func (a Admin) keys() actors.Keys { return actors.Keys{Store: a.Store, Clock: a.Clock} }

// CreateOrg creates an organization on plan, granting the plan's included credits plus extra.
func (a Admin) CreateOrg(ctx context.Context, name, plan string, extraCredits int64) (*actors.OrgState, error) {
	p, ok := a.Catalog.Plan(plan)
	if !ok {
		return nil, fmt.Errorf("unknown plan %q", plan)
	}
	// The console's rule for names (internal/accounts): the operator's organizations are shown beside those.
	name, err := accounts.OrgName(name)
	if err != nil {
		return nil, err
	}
	now := a.Clock.Now()
	st := actors.NewOrgState(actors.NewOrgID(), name, p.Name, now)
	if credits := p.IncludedCredits + extraCredits; credits > 0 {
		if err := st.Grant("grant_initial", credits, now); err != nil {
			return nil, err
		}
	}
	if err := a.orgs().Create(ctx, st); err != nil {
		return nil, err
	}
	return st, nil
}

// ListOrgs returns every organization.
func (a Admin) ListOrgs(ctx context.Context) ([]*actors.OrgState, error) {
	ids, err := a.orgs().List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*actors.OrgState, 0, len(ids))
	for _, id := range ids {
		st, _, err := a.orgs().Load(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// ErrBadMemberName is wrapped by the *hiddenchar.Error AddMember returns for a name it refuses.
var ErrBadMemberName = errors.New("the member's name")

// AddMember adds a member with a role and returns the member id. A name that holds a character which shows
// nothing or reorders the text around it is refused (internal/hiddenchar: the console and `admin org list`
// show members by name beside the organization's).
func (a Admin) AddMember(ctx context.Context, orgID, name string, role actors.Role) (string, error) {
	if err := hiddenchar.Name(ErrBadMemberName, name); err != nil {
		return "", err
	}
	id := actors.NewMemberID()
	_, err := a.orgs().Update(ctx, orgID, func(st *actors.OrgState) error {
		return st.AddMember(id, name, role, a.Clock.Now())
	})
	return id, err
}

// RemoveMember marks a member removed; their keys stop working.
func (a Admin) RemoveMember(ctx context.Context, orgID, memberID string) error {
	_, err := a.orgs().Update(ctx, orgID, func(st *actors.OrgState) error {
		for i := range st.Members {
			if st.Members[i].ID == memberID {
				if st.Members[i].RemovedAt == nil {
					now := a.Clock.Now()
					st.Members[i].RemovedAt = &now
				}
				return nil
			}
		}
		return fmt.Errorf("organization %s has no member %s: %w", orgID, memberID, actors.ErrUnknownMember)
	})
	return err
}

// CreateKey creates an API key for an active member and returns the secret (shown once).
func (a Admin) CreateKey(ctx context.Context, spec actors.NewKeySpec) (string, actors.APIKey, error) {
	st, _, err := a.orgs().Load(ctx, spec.OrgID)
	if err != nil {
		return "", actors.APIKey{}, err
	}
	m, ok := st.Member(spec.MemberID)
	if !ok || m.RemovedAt != nil {
		return "", actors.APIKey{}, fmt.Errorf("organization %s has no active member %s: %w", spec.OrgID, spec.MemberID, actors.ErrUnknownMember)
	}
	if spec.ExpiresAt != nil && !spec.ExpiresAt.After(a.Clock.Now()) {
		return "", actors.APIKey{}, errors.New("the expiry is in the past")
	}
	return a.keys().Create(ctx, spec)
}

// ListKeys lists an organization's keys.
func (a Admin) ListKeys(ctx context.Context, orgID string) ([]actors.APIKey, error) {
	return a.keys().List(ctx, orgID)
}

// RevokeKey revokes a key.
func (a Admin) RevokeKey(ctx context.Context, keyID string) (actors.APIKey, error) {
	return a.keys().Revoke(ctx, keyID)
}

// Grant adds credits once per operation id; an empty op gets a fresh one.
func (a Admin) Grant(ctx context.Context, orgID string, amount int64, op string) (*actors.OrgState, error) {
	if op == "" {
		op = fmt.Sprintf("grant_admin_%d", a.Clock.Now().UnixNano())
	}
	return a.orgs().Update(ctx, orgID, func(st *actors.OrgState) error { return st.Grant(op, amount, a.Clock.Now()) })
}

// Balance returns the organization and up to limit of its latest ledger entries.
func (a Admin) Balance(ctx context.Context, orgID string, limit int) (*actors.OrgState, []actors.LedgerEntry, error) {
	st, _, err := a.orgs().Load(ctx, orgID)
	if err != nil {
		return nil, nil, err
	}
	from := uint64(0)
	if limit > 0 && st.Seq > uint64(limit) {
		from = st.Seq - uint64(limit) + 1
	}
	entries, err := a.orgs().Ledger(ctx, orgID, from, max(limit, 1))
	return st, entries, err
}

// DevOrg is what Bootstrap created.
type DevOrg struct {
	OrgID, MemberID, Secret string
	// ConsoleEmail and ConsolePassword sign the owner in to the web console (/console); the password is shown
	// once, like the key.
	ConsoleEmail, ConsolePassword string
}

// DevConsoleEmail is the development owner's console sign-in.
const DevConsoleEmail = "owner@localhost"

func (a Admin) accounts() *accounts.Accounts {
	acc := accounts.New(a.Store, a.Clock, accounts.Policy{}, 1)
	if a.PasswordCost.Time > 0 {
		acc.Argon2 = a.PasswordCost
	}
	return acc
}

// CreateUser creates a console user for an active member of an organization. An empty password gets a
// random one; the password used is returned (to be shown once).
func (a Admin) CreateUser(ctx context.Context, orgID, memberID, email, password string) (*accounts.User, string, error) {
	st, _, err := a.orgs().Load(ctx, orgID)
	if err != nil {
		return nil, "", err
	}
	m, ok := st.Member(memberID)
	if !ok || m.RemovedAt != nil {
		return nil, "", fmt.Errorf("organization %s has no active member %s: %w", orgID, memberID, actors.ErrUnknownMember)
	}
	if password == "" {
		password = accounts.NewPassword()
	}
	u, err := a.accounts().CreateUser(ctx, email, password, orgID, memberID)
	if err != nil {
		return nil, "", err
	}
	return u, password, nil
}

// ResetPassword sets a console user's password (an empty one gets a random password, returned to be shown
// once), unlocks the account and ends its sessions.
func (a Admin) ResetPassword(ctx context.Context, email, password string) (*accounts.User, string, error) {
	if password == "" {
		password = accounts.NewPassword()
	}
	u, err := a.accounts().ResetPassword(ctx, email, password)
	return u, password, err
}

// ListUsers lists console users (up to limit).
func (a Admin) ListUsers(ctx context.Context, limit int) ([]*accounts.User, error) {
	return a.accounts().List(ctx, limit)
}

// devCredits is the development organization's starting balance: ample for any local test.
const devCredits = 1_000_000

// devPlan is the development organization's plan: one with GPU access.
const devPlan = "business"

// Bootstrap creates, on the first start of an empty data directory, a development organization on a plan
// with GPU access, an owner member and an owner key with every scope. It returns nil when the directory was
// already bootstrapped. A Bootstrap that fails releases its claim, so that the next start tries again.
func (a Admin) Bootstrap(ctx context.Context) (dev *DevOrg, err error) {
	const marker = "node/bootstrapped"
	if _, ok := a.Catalog.Plan(devPlan); !ok {
		return nil, fmt.Errorf("the plan catalog has no %q plan for the development organization", devPlan)
	}
	// The marker is claimed first, with a create-only write, so that of several cluster nodes starting on an
	// empty store exactly one creates the development organization. A crash right after the claim leaves no
	// development key; `filigrane admin key create` makes keys then.
	stamp := []byte(a.Clock.Now().Format(time.RFC3339))
	claim, err := a.Store.CompareAndSet(ctx, []byte(marker), persistence.NoVersion, stamp)
	if errors.Is(err, persistence.ErrVersionMismatch) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("claim bootstrap marker: %w", err)
	}
	defer func() {
		if err == nil {
			return
		}
		// The key was never shown: give the bootstrap back. An organization created before the failure stays,
		// without a usable key; it is harmless.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if rerr := a.Store.Delete(rctx, []byte(marker), claim); rerr != nil {
			err = fmt.Errorf("%w; releasing the bootstrap marker also failed (%v): create a key with "+
				"`filigrane admin org list` and `filigrane admin key create`", err, rerr)
		}
	}()
	st, err := a.CreateOrg(ctx, "Development", devPlan, devCredits)
	if err != nil {
		return nil, fmt.Errorf("create development organization: %w", err)
	}
	memberID, err := a.AddMember(ctx, st.ID, "Developer", actors.RoleOwner)
	if err != nil {
		return nil, fmt.Errorf("add development owner: %w", err)
	}
	secret, _, err := a.CreateKey(ctx, actors.NewKeySpec{OrgID: st.ID, MemberID: memberID, Name: "development",
		Scopes: actors.AllScopes()})
	if err != nil {
		return nil, fmt.Errorf("create development key: %w", err)
	}
	_, password, err := a.CreateUser(ctx, st.ID, memberID, DevConsoleEmail, "")
	if err != nil {
		return nil, fmt.Errorf("create development console owner: %w", err)
	}
	return &DevOrg{OrgID: st.ID, MemberID: memberID, Secret: secret, ConsoleEmail: DevConsoleEmail, ConsolePassword: password}, nil
}
