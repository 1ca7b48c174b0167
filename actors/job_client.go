package actors

import (
	"context"
	"errors"
	"fmt"
)

// ErrCrossedReply is wrapped when a reply is another request's: a job actor's reply carrying another job's record,
// or an organization actor's reply naming another organization.
var ErrCrossedReply = errors.New("a reply meant for another request")

// JobClient is the typed way to talk to job actors.
type JobClient struct {
	Caller Caller
}

func (c JobClient) call(ctx context.Context, requestID string, msg any) (*JobReply, error) {
	for attempt := 0; attempt <= maxFencedRetries; attempt++ {
		r, err := c.Caller.Request(ctx, requestID, KindJob, msg)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", requestID, err)
		}
		rep, ok := r.(*JobReply)
		if !ok {
			return nil, fmt.Errorf("job %s: unexpected reply %T", requestID, r)
		}
		if rep.Record != nil && rep.Record.RequestID != requestID {
			// A reply meant for another request (a late answer to an earlier incarnation of this node reached
			// a request of this one with the same future id, before futures were numbered from a random start:
			// cluster.distinctLocalIDs). Never hand a caller another job's record: it may be another
			// organization's result.
			return nil, fmt.Errorf("job %s: answered with job %s's record: %w", requestID, rep.Record.RequestID, ErrCrossedReply)
		}
		if rep.Code != ReplyRetry {
			return rep, nil
		}
	}
	return &JobReply{Code: ReplyRetry}, nil
}

// Submit accepts a request as a job (or answers the job an idempotent replay names).
func (c JobClient) Submit(ctx context.Context, m JobSubmit) (*JobReply, error) {
	return c.call(ctx, m.Spec.RequestID, &m)
}

// Get reads a job of an organization.
func (c JobClient) Get(ctx context.Context, orgID, requestID string) (*JobReply, error) {
	return c.call(ctx, requestID, &JobGet{RequestID: requestID, OrgID: orgID})
}

// Await waits, until ctx ends, for the job's committed outcome.
func (c JobClient) Await(ctx context.Context, orgID, requestID string) (*JobReply, error) {
	return c.call(ctx, requestID, &JobAwait{RequestID: requestID, OrgID: orgID})
}
