package actors

import (
	"context"
	"errors"
	"testing"

	"filigrane/actors/jobstate"
)

// crossedCaller answers every request with a reply meant for another job, as a peer's late answer to a request
// of an earlier incarnation of this node did when it reached a request of this one with the same future id.
type crossedCaller struct{ rep any }

func (c crossedCaller) Request(context.Context, string, string, any) (any, error) { return c.rep, nil }

// A job reply that carries another job's record is an error, never that record: a synchronous embed waiting on
// its job must not answer its client with another job's (maybe another organization's) result.
func TestJobReplyForAnotherJobIsRefused(t *testing.T) {
	const asked, other = "req_asked", "req_other"
	c := JobClient{Caller: crossedCaller{&JobReply{Code: ReplyOK, Record: &jobstate.Record{RequestID: other, OrgID: "org_b"}}}}
	for name, call := range map[string]func() (*JobReply, error){
		"await": func() (*JobReply, error) { return c.Await(context.Background(), "org_a", asked) },
		"get":   func() (*JobReply, error) { return c.Get(context.Background(), "org_a", asked) },
	} {
		rep, err := call()
		if !errors.Is(err, ErrCrossedReply) || rep != nil {
			t.Errorf("%s: %+v, %v; want ErrCrossedReply and no reply", name, rep, err)
		}
	}
	same := JobClient{Caller: crossedCaller{&JobReply{Code: ReplyOK, Record: &jobstate.Record{RequestID: asked}}}}
	if rep, err := same.Get(context.Background(), "org_a", asked); err != nil || rep.Record.RequestID != asked {
		t.Fatalf("the job's own record: %+v, %v", rep, err)
	}
}

// An organization actor's reply names its organization; a reply naming another one is an error, never shown
// to the request (it would be another organization's balance or admission); one naming none (a node of an
// earlier version) is taken.
func TestOrgReplyForAnotherOrgIsRefused(t *testing.T) {
	ctx := context.Background()
	crossed := OrgClient{Caller: crossedCaller{&OrgReply{OrgID: "org_b", Code: ReplyOK, Balance: 42}}}
	if rep, err := crossed.Get(ctx, "org_a"); !errors.Is(err, ErrCrossedReply) || rep != nil {
		t.Errorf("get: %+v, %v; want ErrCrossedReply", rep, err)
	}
	admit := OrgClient{Caller: crossedCaller{&OrgAdmitReply{OrgID: "org_b", Code: ReplyOK, Allowed: true}}}
	if rep, err := admit.Admit(ctx, "org_a", "mem_1"); !errors.Is(err, ErrCrossedReply) || rep != nil {
		t.Errorf("admit: %+v, %v; want ErrCrossedReply", rep, err)
	}
	for _, id := range []string{"org_a", ""} {
		c := OrgClient{Caller: crossedCaller{&OrgReply{OrgID: id, Code: ReplyOK, Balance: 42}}}
		if rep, err := c.Get(ctx, "org_a"); err != nil || rep.Balance != 42 {
			t.Errorf("a reply naming %q: %+v, %v; want it taken", id, rep, err)
		}
	}
}
