package actors_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"filigrane/actors"
)

// orgNodeDying reaches the organization actor as a cluster does right after that actor's node died: its
// identity moves (and a fresh activation answers) only once the survivors declare the node dead, detect after
// the request was sent, so a request whose deadline comes sooner times out. Other kinds answer at once.
type orgNodeDying struct {
	*localCaller
	detect time.Duration
}

func (c orgNodeDying) Request(ctx context.Context, identity, kind string, msg any) (any, error) {
	if dl, ok := ctx.Deadline(); kind == actors.KindOrg && ok && time.Until(dl) < c.detect {
		return nil, fmt.Errorf("cluster: request %s/%s: %w", kind, identity, context.DeadlineExceeded)
	}
	return c.localCaller.Request(ctx, identity, kind, msg)
}

// TestSubmitRidesThroughTheOrgNodesDeath: a job actor asks the organization actor to hold credits just as that
// actor's node dies. With a wait bounded by the store timeout (10 s) and a failure detection that takes
// longer, the submission failed (the client got 503 service_unavailable: TestTwelveNodes saw it when its
// victim hosted the organization); with Deps.PeerTimeout beyond the detection it is accepted and holds the
// credits once.
func TestSubmitRidesThroughTheOrgNodesDeath(t *testing.T) {
	store := tempStore(t)
	const detect = 30 * time.Second
	for _, tc := range []struct {
		letter      string
		peerTimeout time.Duration
		want        string
	}{
		{"d", 0, actors.ReplyInternal}, // PeerTimeout unset: the store timeout bounds the wait
		{"e", detect + 10*time.Second, actors.ReplyOK},
	} {
		clk, org, spec := submitFixture(t, store, tc.letter)
		sys, c := startSystem(t, store, store, clk)
		t.Cleanup(sys.Shutdown)
		c.deps.StoreTimeout = 10 * time.Second
		c.deps.PeerTimeout = tc.peerTimeout
		c.deps.Caller.Set(orgNodeDying{localCaller: c, detect: detect})
		v, err := c.Request(context.Background(), spec.RequestID, actors.KindJob, &actors.JobSubmit{Spec: spec, Hold: 3, Slot: true})
		if err != nil {
			t.Fatal(err)
		}
		rep := v.(*actors.JobReply)
		if rep.Code != tc.want {
			t.Fatalf("PeerTimeout %v: reply %q (%s), want %q", tc.peerTimeout, rep.Code, rep.Detail, tc.want)
		}
		if tc.want != actors.ReplyOK {
			continue
		}
		v, err = c.Request(context.Background(), org.ID, actors.KindOrg, &actors.OrgGet{OrgID: org.ID})
		if err != nil {
			t.Fatal(err)
		}
		if held := v.(*actors.OrgReply).Held; held != 3 {
			t.Fatalf("held %d credits after the submission, want 3", held)
		}
	}
}
