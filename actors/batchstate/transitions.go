package batchstate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"filigrane/actors/jobstate"
	"filigrane/internal/hiddenchar"
)

// StatusAt is the status a reader sees at now: a draft past its 24 hours is expired even before Tick
// recorded it.
func (r *Record) StatusAt(now time.Time) Status {
	if r.Status == StatusDraft && !now.Before(r.DraftExpiresAt()) {
		return StatusExpired
	}
	return r.Status
}

// Tick applies what time decides at now: a draft not started within 24 hours expires. It reports whether
// the record changed.
func (r *Record) Tick(now time.Time) bool {
	if r.Status == StatusDraft && r.StatusAt(now) == StatusExpired {
		r.Status, r.CompletedAt = StatusExpired, r.DraftExpiresAt()
		r.changed()
		return true
	}
	return false
}

// Start starts a draft at now. started is true when this call started it (202); a batch already started or
// ended is left as it is (200). A draft past 24 hours expires and Start returns ErrExpired (410).
func (r *Record) Start(now time.Time) (started bool, err error) {
	now = now.UTC()
	r.Tick(now)
	switch r.Status {
	case StatusExpired:
		return false, fmt.Errorf("start batch %s: created %s: %w", r.BatchID, r.CreatedAt.Format(time.RFC3339), ErrExpired)
	case StatusDraft:
		r.Status, r.StartedAt = StatusStarting, now
		r.changed()
		return true, nil
	}
	return false, nil
}

// Cancel applies a cancel request at now (spec 3.2): a draft is cancelled at once (no event; its items
// rejected with `cancelled`, its archive `empty`); a started batch that is not assembling rejects its
// pending items with `cancelled`, stays `processing` with CancelRequested while its active items end (their
// jobs are cancelled if they wait for a worker, and finish if they run: CancelJobs), and ends `cancelled`
// once every item ended, whatever they ended as; an assembling batch only remembers the request; an ended
// batch is left as it is.
func (r *Record) Cancel(now time.Time) {
	now = now.UTC()
	r.Tick(now)
	switch {
	case r.Status == StatusDraft:
		// Spec 3.3 has no item status `cancelled`: a cancelled item is `rejected` with error_code
		// `cancelled`, so a draft's items end that way too (never charged), and an archive that will never be
		// built ends `empty` (spec 3.5: "the batch was canceled"), giving a client that polls either field a
		// final value.
		for i := range r.Items {
			r.rejectItem(i, CodeCancelled, "the batch was cancelled before it started", now)
		}
		if r.Archive {
			r.ArchiveStatus = ArchiveEmpty
		}
		r.Status, r.CancelRequested, r.CompletedAt = StatusCancelled, true, now
		r.changed()
	case r.Status == StatusAssembling:
		if !r.CancelRequested {
			r.CancelRequested = true
			r.changed()
		}
	case r.Status.Started():
		if !r.CancelRequested {
			r.CancelRequested = true
			r.changed()
		}
		for i := range r.Items {
			if r.Items[i].Status == ItemPending {
				r.rejectItem(i, CodeCancelled, "the batch was cancelled before this file started", now)
			}
		}
		r.maybeFinish(now)
	}
}

// CancelJobs lists the indexes of items whose jobs the actor must ask to cancel: active items of a batch
// whose cancel was requested before assembling. Each job decides on its own record (spec 3.2, 3.3): one
// waiting for a worker (queued, retrying) fails with `cancelled` and is refunded; a running one finishes,
// succeeding (charged) or failing as a single job would. The batch's item statuses are only its last look at
// the jobs, so the list is every active item, not the ones that looked queued.
func (r *Record) CancelJobs() []int {
	if !r.CancelRequested || r.Status != StatusStarting && r.Status != StatusProcessing {
		return nil
	}
	return r.ActiveItems()
}

// NextPending returns the first pending item of a started batch that is not being cancelled: the next file
// to check and submit, in order (spec 3.2: "files are checked in order").
func (r *Record) NextPending() (int, bool) {
	if r.Status != StatusStarting && r.Status != StatusProcessing || r.CancelRequested {
		return 0, false
	}
	for i := range r.Items {
		if r.Items[i].Status == ItemPending {
			return i, true
		}
	}
	return 0, false
}

// ActiveItems lists the items whose jobs are under way.
func (r *Record) ActiveItems() []int {
	var out []int
	for i := range r.Items {
		if r.Items[i].Status.Active() {
			out = append(out, i)
		}
	}
	return out
}

func (r *Record) item(op string, index int) (*Item, error) {
	if index < 0 || index >= len(r.Items) {
		return nil, fmt.Errorf("%s item %d of batch %s: no such item: %w", op, index, r.BatchID, ErrInvalid)
	}
	return &r.Items[index], nil
}

func (r *Record) decide() {
	if r.Status == StatusStarting {
		r.Status = StatusProcessing
	}
}

// Accept records that pending item index became a job holding held credits (queued). Accepting an item
// again with the same hold is a no-op.
func (r *Record) Accept(index int, held int64, now time.Time) error {
	it, err := r.item("accept", index)
	if err != nil {
		return err
	}
	if it.Accepted() && it.Held == held {
		return nil
	}
	if it.Status != ItemPending || r.Status != StatusStarting && r.Status != StatusProcessing {
		return fmt.Errorf("accept item %d of batch %s: item %s, batch %s: %w", index, r.BatchID, it.Status, r.Status, ErrState)
	}
	if held < 0 {
		return fmt.Errorf("accept item %d: hold %d: %w", index, held, ErrInvalid)
	}
	it.Status, it.Held, it.Job = ItemQueued, held, true
	r.decide()
	r.changed()
	return nil
}

// Reject records that pending item index failed its checks (never charged).
func (r *Record) Reject(index int, code, detail string, now time.Time) error {
	it, err := r.item("reject", index)
	if err != nil {
		return err
	}
	if it.Status == ItemRejected && it.ErrorCode == code {
		return nil
	}
	if it.Status != ItemPending || !r.Status.Started() {
		return fmt.Errorf("reject item %d of batch %s: item %s: %w", index, r.BatchID, it.Status, ErrState)
	}
	if !jobstate.ValidCode(code) {
		return fmt.Errorf("reject item %d: code %q: %w", index, code, ErrInvalid)
	}
	r.rejectItem(index, code, detail, now)
	r.maybeFinish(now)
	return nil
}

// RejectFrom rejects item index and every later pending item with code: credits ran out (spec 3.3: "this and
// every later file rejected; earlier files still run").
func (r *Record) RejectFrom(index int, code, detail string, now time.Time) error {
	if _, err := r.item("reject", index); err != nil {
		return err
	}
	if !jobstate.ValidCode(code) {
		return fmt.Errorf("reject items from %d: code %q: %w", index, code, ErrInvalid)
	}
	if !r.Status.Started() {
		return fmt.Errorf("reject items of batch %s: batch %s: %w", r.BatchID, r.Status, ErrState)
	}
	for i := index; i < len(r.Items); i++ {
		if r.Items[i].Status == ItemPending {
			r.rejectItem(i, code, detail, now)
		}
	}
	r.maybeFinish(now)
	return nil
}

func (r *Record) rejectItem(i int, code, detail string, now time.Time) {
	it := &r.Items[i]
	it.Status, it.ErrorCode, it.ErrorDetail, it.Held, it.Charge = ItemRejected, code, jobstate.TruncateDetail(detail), 0, 0
	r.decide()
	r.changed()
}

// Observe mirrors an active item's job status (queued, running, retrying) onto the item.
func (r *Record) Observe(index int, s ItemStatus) error {
	it, err := r.item("observe", index)
	if err != nil {
		return err
	}
	if !s.Active() {
		return fmt.Errorf("observe item %d: %s is not an active status: %w", index, s, ErrInvalid)
	}
	if !it.Status.Active() || it.Status == s {
		return nil // an ended item stays ended; a late observation changes nothing
	}
	it.Status = s
	r.changed()
	return nil
}

// Succeed records that item index's job succeeded with res, charged charge.
func (r *Record) Succeed(index int, charge int64, res Result, now time.Time) error {
	it, err := r.item("succeed", index)
	if err != nil {
		return err
	}
	if it.Status == ItemSucceeded && it.Charge == charge && sameResult(*it.Result, res) {
		return nil
	}
	if !it.Status.Active() {
		return fmt.Errorf("succeed item %d of batch %s: item %s: %w", index, r.BatchID, it.Status, ErrTerminal)
	}
	if charge < 0 || charge > it.Held || res.BlobKey == "" {
		return fmt.Errorf("succeed item %d: charge %d of hold %d, blob %q: %w", index, charge, it.Held, res.BlobKey, ErrInvalid)
	}
	rs := res
	it.Status, it.Charge, it.Result = ItemSucceeded, charge, &rs
	r.changed()
	r.maybeFinish(now)
	return nil
}

// sameResult compares results, times by instant (a stored time may come back in another location).
func sameResult(a, b Result) bool {
	ta, tb := a.ExpiresAt, b.ExpiresAt
	a.ExpiresAt, b.ExpiresAt = time.Time{}, time.Time{}
	return a == b && ta.Equal(tb)
}

// Fail records that item index's job failed with code (its hold was refunded).
func (r *Record) Fail(index int, code, detail string, now time.Time) error {
	it, err := r.item("fail", index)
	if err != nil {
		return err
	}
	if it.Status == ItemFailed && it.ErrorCode == code {
		return nil
	}
	if !it.Status.Active() {
		return fmt.Errorf("fail item %d of batch %s: item %s: %w", index, r.BatchID, it.Status, ErrTerminal)
	}
	if !jobstate.ValidCode(code) {
		return fmt.Errorf("fail item %d: code %q: %w", index, code, ErrInvalid)
	}
	it.Status, it.ErrorCode, it.ErrorDetail, it.Charge = ItemFailed, code, jobstate.TruncateDetail(detail), 0
	r.changed()
	r.maybeFinish(now)
	return nil
}

// maybeFinish ends a started batch whose items all ended: assembling when an archive is wanted and a file
// succeeded, else completed, failed or cancelled, with its event.
func (r *Record) maybeFinish(now time.Time) {
	if r.Status != StatusStarting && r.Status != StatusProcessing {
		return
	}
	succeeded := 0
	for _, it := range r.Items {
		if !it.Status.Ended() {
			return
		}
		if it.Status == ItemSucceeded {
			succeeded++
		}
	}
	switch {
	case r.CancelRequested:
		r.end(StatusCancelled, now)
		if r.Archive {
			r.ArchiveStatus = ArchiveEmpty
		}
	case r.Archive && succeeded > 0:
		r.Status, r.ArchiveStatus = StatusAssembling, ArchiveQueued
	case succeeded > 0:
		r.end(StatusCompleted, now)
	default:
		r.end(StatusFailed, now)
		if r.Archive {
			r.ArchiveStatus = ArchiveEmpty
		}
	}
	r.changed()
}

func (r *Record) end(s Status, now time.Time) {
	r.Status, r.CompletedAt = s, now
	typ := EventCompleted
	switch s {
	case StatusFailed:
		typ = EventFailed
	case StatusCancelled:
		typ = EventCancelled
	}
	r.Events = append(r.Events, Event{ID: EventID(r.BatchID, typ), Type: typ, At: now})
}

// EventID is the id of the batch's event of type typ: derived, so that a repeated commit never makes a
// second event.
func EventID(batchID, typ string) string {
	sum := sha256.Sum256([]byte("filigrane/batch-event\x00" + batchID + "\x00" + typ))
	return "evt_" + hex.EncodeToString(sum[:16])
}

// ArchiveDone ends an assembling batch with the archive's outcome: ready (with the stored zip), too_large
// or failed. The batch completes either way (at least one file was watermarked).
func (r *Record) ArchiveDone(outcome ArchiveStatus, blobKey string, size int64, now time.Time) error {
	now = now.UTC()
	if r.Status == StatusCompleted && r.ArchiveStatus == outcome && r.ArchiveBlobKey == blobKey {
		return nil
	}
	if r.Status != StatusAssembling {
		return fmt.Errorf("archive of batch %s: batch %s: %w", r.BatchID, r.Status, ErrState)
	}
	switch outcome {
	case ArchiveReady:
		if blobKey == "" || size <= 0 {
			return fmt.Errorf("archive of batch %s: ready without a zip: %w", r.BatchID, ErrInvalid)
		}
		r.ArchiveBlobKey, r.ArchiveSize, r.ArchiveExpiresAt = blobKey, size, now.Add(ArchiveRetention)
	case ArchiveTooLarge, ArchiveFailed:
		if blobKey != "" {
			return fmt.Errorf("archive of batch %s: %s with a zip: %w", r.BatchID, outcome, ErrInvalid)
		}
	default:
		return fmt.Errorf("archive of batch %s: outcome %q: %w", r.BatchID, outcome, ErrInvalid)
	}
	r.ArchiveStatus = outcome
	r.end(StatusCompleted, now)
	r.changed()
	return nil
}

// ArchiveStarted moves a queued archive to assembling (spec 3.5: null, then queued, assembling, ready) as its
// first build begins at now, and reports whether it did; any other state is left as it is.
func (r *Record) ArchiveStarted(now time.Time) bool {
	if r.Status != StatusAssembling || r.ArchiveStatus != ArchiveQueued {
		return false
	}
	r.ArchiveStatus, r.ArchiveStartedAt = ArchiveAssembling, now.UTC()
	r.changed()
	return true
}

// ArchiveAvailable reports whether the ready archive can be downloaded at now.
func (r *Record) ArchiveAvailable(now time.Time) bool {
	return r.ArchiveStatus == ArchiveReady && now.Before(r.ArchiveExpiresAt)
}

// PendingEvents lists the events not yet handed to delivery.
func (r *Record) PendingEvents() []Event {
	var out []Event
	for _, e := range r.Events {
		if !e.Delivered {
			out = append(out, e)
		}
	}
	return out
}

// MarkDelivered records that the event id was handed to delivery.
func (r *Record) MarkDelivered(id string) {
	for i := range r.Events {
		if r.Events[i].ID == id && !r.Events[i].Delivered {
			r.Events[i].Delivered = true
			r.changed()
		}
	}
}

// Remove reduces an ended (or expired) record to its tombstone once RecordRetention passed, and reports
// whether it did. The fingerprint stays, so that the key answers 409 from then on.
func (r *Record) Remove(now time.Time) bool {
	r.Tick(now)
	if r.Removed || !r.Status.Ended() || now.Before(r.RetainUntil()) {
		return false
	}
	r.Removed, r.Items, r.Events = true, nil, nil
	r.ArchiveBlobKey, r.ZipBlobKey = "", ""
	r.changed()
	return true
}

// Counts are the batch's item counts (spec 2.4).
type Counts struct {
	Pending    int `json:"pending"`
	Accepted   int `json:"accepted"`
	Rejected   int `json:"rejected"`
	Succeeded  int `json:"succeeded"`
	Failed     int `json:"failed"`
	InProgress int `json:"in_progress"`
}

// Credits are the batch's credits (spec 2.4).
type Credits struct {
	Reserved int64 `json:"reserved"`
	Charged  int64 `json:"charged"`
	Refunded int64 `json:"refunded"`
}

// Counts counts the items by status.
func (r *Record) Counts() Counts {
	var c Counts
	for i := range r.Items {
		it := &r.Items[i]
		if it.Accepted() {
			c.Accepted++
		}
		switch {
		case it.Status == ItemPending:
			c.Pending++
		case it.Status == ItemRejected:
			c.Rejected++
		case it.Status == ItemSucceeded:
			c.Succeeded++
		case it.Status == ItemFailed:
			c.Failed++
		case it.Status.Active():
			c.InProgress++
		}
	}
	return c
}

// Credits sums the items' credits.
func (r *Record) Credits() Credits {
	var c Credits
	for i := range r.Items {
		it := &r.Items[i]
		switch {
		case it.Status.Active():
			c.Reserved += it.Held
		case it.Status == ItemSucceeded:
			c.Charged += it.Charge
		case it.Status == ItemFailed:
			c.Refunded += it.Held
		}
	}
	return c
}

// ArchiveName is the name of item it's result inside the archive (spec 2.4):
// `<index 3 digits>-<original name without extension>-watermarked.<extension>`. Path parts of a zip member
// name are dropped, so that the archive holds no folders, and so is every character internal/hiddenchar hides
// in a name (control characters, bidirectional controls, zero-width spaces, line separators, private-use and
// unassigned code points): a client's name with a right-to-left override would show in the reader's file
// manager with its characters after it reversed (a result `...-watermarked.png` shown as if it ended in another
// extension), and a line break would split the listing. The item's filename itself is kept as sent: it is the
// zip member's exact path, the client's reference to its file.
func ArchiveName(it *Item) string {
	base := it.Filename
	if i := strings.LastIndexAny(base, "/\\"); i >= 0 {
		base = base[i+1:]
	}
	base = strings.Map(func(r rune) rune {
		if hiddenchar.Hidden(r) {
			return -1
		}
		return r
	}, base)
	if dot := strings.LastIndexByte(base, '.'); dot > 0 {
		base = base[:dot]
	}
	ext := "bin"
	if it.Result != nil && it.Result.Ext != "" {
		ext = it.Result.Ext
	}
	return fmt.Sprintf("%03d-%s-watermarked.%s", it.Index, base, ext)
}
