package actors

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Caller sends a request to a virtual actor and waits for its reply. The cluster node implements it; the
// reply is the plain Go value the actor responded with.
type Caller interface {
	Request(ctx context.Context, identity, kind string, msg any) (any, error)
}

// OrgClient is the typed way to talk to organization actors.
type OrgClient struct {
	Caller Caller
}

// maxFencedRetries bounds how often a command is re-sent after the actor reported ReplyRetry (it lost its
// record to another activation and stopped; the next send activates a fresh one that reloads).
const maxFencedRetries = 3

func (c OrgClient) call(ctx context.Context, orgID string, msg any) (any, error) {
	var last any
	for attempt := 0; attempt <= maxFencedRetries; attempt++ {
		reply, err := c.Caller.Request(ctx, orgID, KindOrg, msg)
		if err != nil {
			return nil, fmt.Errorf("org %s: %w", orgID, err)
		}
		last = reply
		switch r := reply.(type) {
		case *OrgReply:
			if r.OrgID != "" && r.OrgID != orgID {
				return nil, fmt.Errorf("org %s: answered by org %s: %w", orgID, r.OrgID, ErrCrossedReply)
			}
			if r.Code != ReplyRetry {
				return r, nil
			}
		case *OrgAdmitReply:
			if r.OrgID != "" && r.OrgID != orgID {
				return nil, fmt.Errorf("org %s: answered by org %s: %w", orgID, r.OrgID, ErrCrossedReply)
			}
			if r.Code != ReplyRetry {
				return r, nil
			}
		default:
			return nil, fmt.Errorf("org %s: unexpected reply %T", orgID, reply)
		}
	}
	return last, nil
}

// Admit checks membership and counts one request against the plan's per-minute limit.
func (c OrgClient) Admit(ctx context.Context, orgID, memberID string) (*OrgAdmitReply, error) {
	r, err := c.call(ctx, orgID, &OrgAdmit{OrgID: orgID, MemberID: memberID})
	if err != nil {
		return nil, err
	}
	if rep, ok := r.(*OrgAdmitReply); ok {
		return rep, nil
	}
	if rep, ok := r.(*OrgReply); ok { // the actor answers OrgReply when the organization is missing
		return &OrgAdmitReply{Code: rep.Code}, nil
	}
	return nil, fmt.Errorf("org %s: unexpected reply %T", orgID, r)
}

func (c OrgClient) command(ctx context.Context, orgID string, msg any) (*OrgReply, error) {
	r, err := c.call(ctx, orgID, msg)
	if err != nil {
		return nil, err
	}
	rep, ok := r.(*OrgReply)
	if !ok {
		return nil, fmt.Errorf("org %s: unexpected reply %T", orgID, r)
	}
	return rep, nil
}

// Reserve holds credits (and a slot when asked) for an operation.
func (c OrgClient) Reserve(ctx context.Context, m OrgReserve) (*OrgReply, error) {
	return c.command(ctx, m.OrgID, &m)
}

// Charge settles an operation at the actual price.
func (c OrgClient) Charge(ctx context.Context, m OrgCharge) (*OrgReply, error) {
	return c.command(ctx, m.OrgID, &m)
}

// Release frees an operation's hold and slot.
func (c OrgClient) Release(ctx context.Context, m OrgRelease) (*OrgReply, error) {
	return c.command(ctx, m.OrgID, &m)
}

// Grant adds credits.
func (c OrgClient) Grant(ctx context.Context, m OrgGrant) (*OrgReply, error) {
	return c.command(ctx, m.OrgID, &m)
}

// Refresh makes the organization's actor read its record again (after a change made outside it).
func (c OrgClient) Refresh(ctx context.Context, orgID string) error {
	r, err := c.command(ctx, orgID, &OrgRefresh{OrgID: orgID})
	if err != nil {
		return err
	}
	if r.Code != ReplyOK {
		return fmt.Errorf("org %s: refresh answered %s", orgID, r.Code)
	}
	return nil
}

// Get reads the balance.
func (c OrgClient) Get(ctx context.Context, orgID string) (*OrgReply, error) {
	return c.command(ctx, orgID, &OrgGet{OrgID: orgID})
}

// LateCaller is a Caller whose target is set after construction: actor kinds are registered before the
// cluster member that carries their requests exists. The zero value is ready to use.
type LateCaller struct {
	c    atomic.Pointer[Caller]
	once sync.Once
	set  chan struct{} // closed by the first Set
}

func (l *LateCaller) installed() chan struct{} {
	l.once.Do(func() { l.set = make(chan struct{}) })
	return l.set
}

// Set installs the caller. Requests waiting for one go on.
func (l *LateCaller) Set(c Caller) {
	if l.c.Swap(&c) == nil {
		close(l.installed())
	}
}

// MemberGone reports whether the installed caller's cluster knows the process that was member memberID of
// the node named node to be gone (cluster.Node's Gone); false for "", before a caller is installed, or for a
// caller without a membership view.
func (l *LateCaller) MemberGone(node, memberID string) bool {
	c := l.c.Load()
	if c == nil || memberID == "" {
		return false
	}
	m, ok := (*c).(interface {
		Gone(name, memberID string) bool
	})
	return ok && m.Gone(node, memberID)
}

// Request forwards to the installed caller, waiting for one within ctx. The cluster hosts actors on a node
// as soon as its member joins the topology, a moment before the member's start returns and the node installs
// the caller (protoactor's start alone takes a second): an actor activated then (a job a restarted node took
// over, asking the organization actor to hold credits) waits instead of failing its request.
func (l *LateCaller) Request(ctx context.Context, identity, kind string, msg any) (any, error) {
	c := l.c.Load()
	if c == nil {
		select {
		case <-l.installed():
			c = l.c.Load()
		case <-ctx.Done():
			return nil, fmt.Errorf("actors: cluster member not started yet: %w", ctx.Err())
		}
	}
	return (*c).Request(ctx, identity, kind, msg)
}
