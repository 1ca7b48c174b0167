package http

import (
	"context"

	"filigrane/actors/jobstate"
)

// uploadOutcome is what became of a request that used an upload.
type uploadOutcome int

const (
	// uploadConsumed: the request was accepted (a job, or a synchronous detection); the upload is used up.
	uploadConsumed uploadOutcome = iota
	// uploadReleased: a refusal that can be retried (credits, concurrency, a sync detection too large to
	// answer in the request); the upload stays usable.
	uploadReleased
	// uploadRejected: the file cannot be used; the upload is rejected with the request's error.
	uploadRejected
)

// claimUpload locks a received upload of the caller's organization for request reqID and returns its file.
// STUB until issue 6 lands: every upload id is unknown.
func (s *Server) claimUpload(c context.Context, p *principal, uploadID, reqID string, op jobstate.Operation) (*storedFile, *apiError) {
	return nil, newAPIError(CodeNotFound, "upload %q is unknown", truncate(uploadID, 64))
}

// settleUpload records the outcome of a request that claimed an upload.
func (s *Server) settleUpload(c context.Context, p *principal, uploadID, reqID string, outcome uploadOutcome, aerr *apiError) {
}

// uploadRoutes registers the upload endpoints on the API listener. STUB until issue 6 lands.
func (s *Server) uploadRoutes() {}
