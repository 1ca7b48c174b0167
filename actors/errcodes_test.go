package actors

import (
	"testing"

	"filigrane/actors/jobstate"
	"filigrane/actors/mediafiles"
	"filigrane/internal/problem"
)

// jobErrorCodes are the error codes a failed job can carry: those workers report (ProcessError) and those
// the job state machine sets itself.
var jobErrorCodes = []string{
	CodeInvalidImage, CodeImageTooLarge, CodeImageTooComplex, CodeProcessingError, CodeDecodeBusy, CodeFileTooLarge, CodeMediaUnavailable,
	mediafiles.CodeInvalidVideo, mediafiles.CodeVideoTooLarge, mediafiles.CodeInvalidDocument, mediafiles.CodeDocumentTooLarge,
	jobstate.CodeDeadlineExceeded, jobstate.CodeWorkerLost, jobstate.CodeCancelled,
}

// TestJobErrorCodesAreTheTablesJobCodes: every code a job can fail with is a job code of the error table (so
// its result answers that code's status, not processing_error's 500), and every job code of the table is one
// a job can fail with (the table lists no dead job code).
func TestJobErrorCodesAreTheTablesJobCodes(t *testing.T) {
	produced := map[string]bool{}
	for _, code := range jobErrorCodes {
		produced[code] = true
		e, ok := problem.Lookup(problem.Code(code))
		if !ok || !e.Job {
			t.Errorf("job error code %q is not a job code of the error table", code)
			continue
		}
		if got := problem.ForJob(code); got.Code != e.Code || got.Status != e.Status {
			t.Errorf("ForJob(%q) = %s %d, want %d", code, got.Code, got.Status, e.Status)
		}
	}
	for _, e := range problem.All() {
		if e.Job && !produced[string(e.Code)] {
			t.Errorf("the error table marks %q a job code, but no job fails with it", e.Code)
		}
	}
}
