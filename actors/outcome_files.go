package actors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"filigrane/actors/jobstate"
	"filigrane/persistence"
)

// OutcomeFiles keeps, beside a result an attempt stored, the Output that describes it (the job's outcome file,
// OutcomeKey), so that the job can succeed from that result when the attempt's report of it was never
// recorded: the store refused it for want of disk space (below an eighth of --min-free-disk, where no record
// is written) and the node restarted before space came back, which lost the report the job's activation kept
// in memory, or the node died between storing the result and reporting it. The job's tick, once the attempt's
// lease lapsed, reads the file (Stored) before it counts the attempt as a lost worker. A result alone is not
// enough: its Output also holds what only the attempt knew (the charge, the media's sizes, a video's units, a
// detection's summary).
//
// A worker writes the file after the result (Keep), before its report. The job's actor deletes it once the job
// is settled, and again when a report comes after that (a stale attempt's, whose file it is); a failed job's
// purge entry lists it too, for a late attempt whose report never came. It is kept only where the job's records share the data directory's
// disk with the blob store (one node): in a cluster the records live in object storage, which a low local disk
// does not refuse, and each file would cost two object storage requests per job. A nil *OutcomeFiles keeps
// nothing and finds nothing.
type OutcomeFiles struct {
	Blobs persistence.Blobs
	// Needed, when set, says whether Keep writes the file now: the node's disk is near its reserve
	// (diskspace.Guard.Near), where a report may soon be refused. A file costs a synced write and a delete per
	// job (about 4 ms on this project's development disk), which a disk with room does not need: there a report
	// is written, and a node that dies between storing a result and reporting it has the attempt run again, as
	// it would without the file. nil: always.
	Needed func() bool
}

// OutcomeKey is where the outcome file of rec's job is kept, beside its result.
func OutcomeKey(rec *jobstate.Record) string { return OutputKey(rec, "outcome") }

// maxOutcomeFile bounds what Stored reads: an Output is at most a detection summary
// (jobstate.MaxDetectionSummary) or a video's units (jobstate.MaxEmbedUnits) and a few short fields.
const maxOutcomeFile = 256 << 10

// storedOutcome is the outcome file's content.
type storedOutcome struct {
	RequestID string          `msgpack:"request_id"`
	Output    jobstate.Output `msgpack:"output"`
}

// SchemaVersion implements persistence.Record.
func (*storedOutcome) SchemaVersion() uint16 { return 1 }

// Keep writes out, the Output of a result an attempt of rec's job stored, as the job's outcome file, when it is
// Needed.
func (f *OutcomeFiles) Keep(ctx context.Context, rec *jobstate.Record, out jobstate.Output) error {
	if f == nil || (f.Needed != nil && !f.Needed()) {
		return nil
	}
	b, err := persistence.Marshal(&storedOutcome{RequestID: rec.RequestID, Output: out})
	if err != nil {
		return fmt.Errorf("outcome file of %s: %w", rec.RequestID, err)
	}
	if _, err := f.Blobs.Put(ctx, OutcomeKey(rec), bytes.NewReader(b)); err != nil {
		return fmt.Errorf("outcome file of %s: %w", rec.RequestID, err)
	}
	return nil
}

// Stored returns the Output in rec's outcome file when the result it describes is stored as it says (under
// one of the job's output keys, with its size and digest), or nil: no file, or a file that does not describe
// the stored result (another attempt stored a different one since). An error says the blob store could not
// answer.
func (f *OutcomeFiles) Stored(ctx context.Context, rec *jobstate.Record) (*jobstate.Output, error) {
	if f == nil {
		return nil, nil
	}
	r, err := f.Blobs.Get(ctx, OutcomeKey(rec), 0, maxOutcomeFile+1)
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("outcome file of %s: %w", rec.RequestID, err)
	}
	b, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		return nil, fmt.Errorf("outcome file of %s: %w", rec.RequestID, err)
	}
	var s storedOutcome
	if len(b) > maxOutcomeFile || persistence.Unmarshal(b, &s) != nil || s.RequestID != rec.RequestID ||
		!slices.Contains(OutputKeys(rec), s.Output.BlobKey) {
		return nil, nil // not one this build wrote for this job: the attempt counts as lost, as before
	}
	info, err := f.Blobs.Stat(ctx, s.Output.BlobKey)
	switch {
	case errors.Is(err, persistence.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("outcome file of %s: result %s: %w", rec.RequestID, s.Output.BlobKey, err)
	case info.Size != s.Output.Size || info.SHA256 != s.Output.SHA256:
		return nil, nil
	}
	return &s.Output, nil
}

// Drop deletes rec's outcome file (none is no error).
func (f *OutcomeFiles) Drop(ctx context.Context, rec *jobstate.Record) error {
	if f == nil {
		return nil
	}
	if err := f.Blobs.Delete(ctx, OutcomeKey(rec)); err != nil {
		return fmt.Errorf("outcome file of %s: %w", rec.RequestID, err)
	}
	return nil
}
