package jobstate

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Record is a job's durable record. The job actor stores it with persistence.Marshal under compare-and-set;
// the fields are exported for the codec, but only this package's methods should change them.
type Record struct {
	RequestID string    `msgpack:"request_id"`
	OrgID     string    `msgpack:"org_id"`
	Status    Status    `msgpack:"status"`
	Operation Operation `msgpack:"operation"`
	Media     Media     `msgpack:"media"`
	// Format is the media format label shown on the receipt (`PNG`, `PDF`, `MP4`...).
	Format string `msgpack:"format"`
	// FrameCount is the frames or pages counted at acceptance; it sets a video's deadline.
	FrameCount int `msgpack:"frame_count"`
	// MaxWork is the work bound (estimated CPU time of one core) the accepting node's probe checked a video
	// against; every attempt rechecks the video by it, not by its own node's setting. 0: none recorded (an
	// image or a document, or a job accepted before the bound was kept): the worker's own.
	MaxWork              time.Duration `msgpack:"max_work,omitempty"`
	AcceleratorRequested Accelerator   `msgpack:"accelerator_requested"`
	// CreditsHeld is what the org actor reserved at acceptance (3x for gpu); the charge never exceeds it.
	CreditsHeld          int64  `msgpack:"credits_held"`
	WebhookID            string `msgpack:"webhook_id"`
	BatchID              string `msgpack:"batch_id"`
	StorageDestinationID string `msgpack:"storage_destination_id"`
	StorageKey           string `msgpack:"storage_key"`
	// OutputFormat is an image embed's output format; empty means PNG (and is all records before it had).
	OutputFormat OutputFormat `msgpack:"output_format,omitempty"`
	// Sync says a client waited for the outcome when the job was accepted (a synchronous request): the
	// workers' queues take it ahead of its organization's async and batch work (actors/workqueue).
	Sync bool `msgpack:"sync,omitempty"`

	Input Input `msgpack:"input"`
	// WatermarkID is the hex SHA-256 of the canonical data object, fixed at acceptance so that every attempt
	// embeds the same mark. Empty for detection.
	WatermarkID string `msgpack:"watermark_id"`
	// Idempotency is the request's fingerprint; zero when the request carried no Idempotency-Key.
	Idempotency Fingerprint `msgpack:"idempotency"`

	CreatedAt   time.Time `msgpack:"created_at"`
	StartedAt   time.Time `msgpack:"started_at"`   // first claim; zero until then
	CompletedAt time.Time `msgpack:"completed_at"` // when the status became terminal
	Deadline    time.Time `msgpack:"deadline"`

	// Attempts counts claims (spec: "processing attempts so far; starts at 0").
	Attempts int `msgpack:"attempts"`
	// Epoch increases on every claim; the lease token is the epoch of its claim (fencing).
	Epoch Token `msgpack:"epoch"`
	// Lease is the current attempt's lease; set exactly while running.
	Lease *Lease `msgpack:"lease"`
	// NextAttemptAt is when a retrying job may be claimed again; zero unless retrying.
	NextAttemptAt time.Time     `msgpack:"next_attempt_at"`
	LastError     *AttemptError `msgpack:"last_error"`
	// AttemptNodes names the node that claimed each attempt, oldest first (handed-back attempts included), at
	// most MaxAttemptNodes: operators see where work ran (the receipt's `node` and `attempt_nodes`).
	AttemptNodes []string `msgpack:"attempt_nodes,omitempty"`
	// DiskWaits counts the attempts that ended because their node was low on disk space (WaitForDisk); they
	// do not count in Attempts, and each wait doubles, up to MaxDiskWait.
	DiskWaits int `msgpack:"disk_waits,omitempty"`
	// CancelPending is set when a cancelled batch found this file running (CancelWaiting): the running
	// attempt may finish, but the job never waits for a worker again; an attempt that would leave it queued
	// or retrying fails it with "cancelled" instead. Durable, so that a restart keeps it.
	CancelPending bool `msgpack:"cancel_pending,omitempty"`

	// ErrorCode and ErrorDetail are set exactly when the job failed.
	ErrorCode   string `msgpack:"error_code"`
	ErrorDetail string `msgpack:"error_detail"`
	// Output is set exactly when the job succeeded.
	Output          *Output   `msgpack:"output"`
	ResultExpiresAt time.Time `msgpack:"result_expires_at"`

	Settlement Settlement `msgpack:"settlement"`
	// Revision counts changes to this record; compare it before and after a command to know whether the
	// record needs writing (idempotent repeats leave it alone).
	Revision uint64 `msgpack:"revision"`

	// VoidedAt is set, and nothing else but RequestID, on a void record (see Void).
	VoidedAt time.Time `msgpack:"voided_at,omitempty"`
}

// Void returns the record that stands for "no job" under requestID: the job actor writes it (create-only)
// when it finds an active-index entry whose submission never committed its record. Taking the key fences that
// submission: if its activation is only paused (a frozen or partitioned node), its late create-only write of
// the record fails instead of creating a job that nothing ticks any more. A void record reads as no job; a
// later submission under the same request id replaces it.
func Void(requestID string, now time.Time) *Record {
	return &Record{RequestID: requestID, VoidedAt: now.UTC()}
}

// IsVoid reports whether r is a void record (see Void).
func (r *Record) IsVoid() bool { return r != nil && !r.VoidedAt.IsZero() }

// SchemaVersion is the layout version of stored job records.
func (*Record) SchemaVersion() uint16 { return 1 }

// Spec is what the edge and the job actor know about a request when they accept it: validated input, credits
// already reserved with the org actor under the request id.
type Spec struct {
	RequestID  string
	OrgID      string
	Operation  Operation
	Media      Media
	Format     string
	FrameCount int
	// MaxWork is the video work bound the accepting probe checked (mediakind.Info.MaxWork); 0 for none.
	MaxWork              time.Duration
	AcceleratorRequested Accelerator // empty means cpu
	CreditsHeld          int64
	WebhookID            string
	BatchID              string
	StorageDestinationID string
	StorageKey           string
	// OutputFormat is an image embed's output format; empty means PNG.
	OutputFormat OutputFormat
	// Sync says the client waits for the outcome (a synchronous request), not a receipt.
	Sync  bool
	Input Input
	// WatermarkID is the hex SHA-256 of the canonical data object (embed only).
	WatermarkID string
	// IdempotencyKey is the request's Idempotency-Key header; empty when absent.
	IdempotencyKey string
	// ExtraOptions are request options not named above; they take part in the idempotency fingerprint.
	ExtraOptions map[string]string
}

// FingerprintInput returns the inputs and options of s that decide whether a replay is the same request.
func (s Spec) FingerprintInput() FingerprintInput {
	return FingerprintInput{
		Operation: s.Operation, Media: s.Media, FileSHA256: s.Input.SHA256, DataDigest: s.WatermarkID,
		Accelerator: s.AcceleratorRequested, WebhookID: s.WebhookID,
		StorageDestinationID: s.StorageDestinationID, StorageKey: s.StorageKey, OutputFormat: s.OutputFormat,
		Extra: s.ExtraOptions,
	}
}

// Fingerprint returns s's idempotency fingerprint; the zero Fingerprint when s has no Idempotency-Key.
func (s Spec) Fingerprint() (Fingerprint, error) {
	if s.IdempotencyKey == "" {
		return Fingerprint{}, nil
	}
	return NewFingerprint(s.IdempotencyKey, s.FingerprintInput())
}

// DeadlineFor is how long a job may take from acceptance (spec 8): 30 minutes for images and documents; for
// video 30 minutes plus 15 seconds per frame, at most 90 minutes.
func DeadlineFor(m Media, frames int) time.Duration {
	if m != MediaVideo || frames <= 0 {
		return BaseDeadline
	}
	// Compare in frames before multiplying, so that absurd frame counts cannot overflow the Duration.
	if maxFrames := int((MaxVideoDeadline - BaseDeadline) / VideoPerFrame); frames >= maxFrames {
		return MaxVideoDeadline
	}
	return BaseDeadline + time.Duration(frames)*VideoPerFrame
}

// Accept creates the queued record of a newly accepted request at now.
func Accept(s Spec, now time.Time) (*Record, error) {
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("accept job %s: %w", s.RequestID, err)
	}
	fp, err := s.Fingerprint()
	if err != nil {
		return nil, fmt.Errorf("accept job %s: %w", s.RequestID, err)
	}
	now = now.UTC()
	accel := s.AcceleratorRequested
	if accel == "" {
		accel = AcceleratorCPU
	}
	r := &Record{
		RequestID: s.RequestID, OrgID: s.OrgID, Status: StatusQueued, Operation: s.Operation, Media: s.Media,
		Format: s.Format, FrameCount: s.FrameCount, MaxWork: s.MaxWork, AcceleratorRequested: accel, CreditsHeld: s.CreditsHeld,
		WebhookID: s.WebhookID, BatchID: s.BatchID,
		StorageDestinationID: s.StorageDestinationID, StorageKey: s.StorageKey, OutputFormat: s.OutputFormat.stored(),
		Sync: s.Sync, Input: s.Input, WatermarkID: s.WatermarkID, Idempotency: fp,
		CreatedAt: now, Deadline: now.Add(DeadlineFor(s.Media, s.FrameCount)),
		Revision: 1,
	}
	return r, nil
}

func (s Spec) validate() error {
	if !ValidRequestID(s.RequestID) {
		return fmt.Errorf("request id %q is not req_ + 64 lowercase hex: %w", s.RequestID, ErrInvalid)
	}
	if s.OrgID == "" {
		return fmt.Errorf("organization id is empty: %w", ErrInvalid)
	}
	if _, err := ParseOperation(string(s.Operation)); err != nil {
		return err
	}
	if _, err := ParseMedia(string(s.Media)); err != nil {
		return err
	}
	if _, err := ParseAccelerator(string(s.AcceleratorRequested)); err != nil {
		return err
	}
	if f, err := ParseOutputFormat(string(s.OutputFormat)); err != nil || f != s.OutputFormat.OrPNG() {
		return fmt.Errorf("output format %q (want png, jpeg or webp): %w", s.OutputFormat, ErrInvalid)
	}
	if s.OutputFormat.stored() != "" && (s.Operation != OperationEmbed || s.Media != MediaImage) {
		return fmt.Errorf("output format %s on a %s %s job: only image embeds choose one: %w", s.OutputFormat,
			s.Media, s.Operation, ErrInvalid)
	}
	if s.Format == "" || len(s.Format) > 32 {
		return fmt.Errorf("format label %q must be 1 to 32 bytes: %w", s.Format, ErrInvalid)
	}
	if s.FrameCount < 1 {
		return fmt.Errorf("frame count %d: every file has at least one frame or page: %w", s.FrameCount, ErrInvalid)
	}
	if s.MaxWork < 0 || (s.MaxWork > 0 && s.Media != MediaVideo) {
		return fmt.Errorf("work bound %v on a %s job: only videos have one, never negative: %w", s.MaxWork, s.Media, ErrInvalid)
	}
	if s.CreditsHeld < 0 {
		return fmt.Errorf("credits held %d is negative: %w", s.CreditsHeld, ErrInvalid)
	}
	if s.WebhookID != "" && !validPrefixedHex(s.WebhookID, "wh_", 32) {
		return fmt.Errorf("webhook id %q is not wh_ + 32 hex: %w", s.WebhookID, ErrInvalid)
	}
	if s.BatchID != "" && !validPrefixedHex(s.BatchID, "bat_", 32) {
		return fmt.Errorf("batch id %q is not bat_ + 32 hex: %w", s.BatchID, ErrInvalid)
	}
	if s.StorageKey != "" && s.StorageDestinationID == "" {
		return fmt.Errorf("storage key without a storage destination: %w", ErrInvalid)
	}
	if s.StorageDestinationID != "" && s.Operation != OperationEmbed {
		return fmt.Errorf("storage destination on a %s job: only embedding stores results: %w", s.Operation, ErrInvalid)
	}
	if s.Input.BlobKey == "" {
		return fmt.Errorf("input blob key is empty: %w", ErrInvalid)
	}
	if !ValidHex(s.Input.SHA256, 64) {
		return fmt.Errorf("input sha256 %q is not 64 lowercase hex: %w", s.Input.SHA256, ErrInvalid)
	}
	if s.Input.Size <= 0 {
		return fmt.Errorf("input size %d: %w", s.Input.Size, ErrInvalid)
	}
	switch s.Operation {
	case OperationEmbed:
		if !ValidHex(s.WatermarkID, 64) {
			return fmt.Errorf("watermark id %q is not 64 lowercase hex: %w", s.WatermarkID, ErrInvalid)
		}
	case OperationDetect:
		if s.WatermarkID != "" {
			return fmt.Errorf("detection job with a watermark id: %w", ErrInvalid)
		}
	}
	return nil
}

// ValidRequestID reports whether id has the form req_ + 64 lowercase hex characters.
func ValidRequestID(id string) bool { return validPrefixedHex(id, "req_", 64) }

func validPrefixedHex(s, prefix string, n int) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	return ok && ValidHex(rest, n)
}

// ValidHex accepts exactly n lowercase hex digits; ids and digests have one spelling so they compare as strings.
func ValidHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Clone returns a deep copy, so that a command can be tried without touching the committed record.
func (r *Record) Clone() *Record {
	c := *r
	if r.Lease != nil {
		l := *r.Lease
		c.Lease = &l
	}
	if r.LastError != nil {
		e := *r.LastError
		c.LastError = &e
	}
	if r.Output != nil {
		o := *r.Output
		c.Output = &o
	}
	c.AttemptNodes = slices.Clone(r.AttemptNodes)
	return &c
}

// Validate checks the record's invariants. The actor calls it after loading: a record that breaks them was
// written by a buggy or newer build, and acting on it would be guessing (DESIGN.md rule 1).
func (r *Record) Validate() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("job record %s: %s: %w", r.RequestID, fmt.Sprintf(format, args...), ErrInvalid)
	}
	if !ValidRequestID(r.RequestID) || r.OrgID == "" {
		return fail("identity %q of organization %q", r.RequestID, r.OrgID)
	}
	if !r.Status.valid() {
		return fail("unknown status %q", r.Status)
	}
	if _, err := ParseOperation(string(r.Operation)); err != nil {
		return fail("%v", err)
	}
	if _, err := ParseMedia(string(r.Media)); err != nil {
		return fail("%v", err)
	}
	if r.AcceleratorRequested != AcceleratorCPU && r.AcceleratorRequested != AcceleratorGPU {
		return fail("accelerator requested %q", r.AcceleratorRequested)
	}
	if f := r.OutputFormat; f != "" && (f != OutputJPEG && f != OutputWebP || r.Operation != OperationEmbed || r.Media != MediaImage) {
		return fail("output format %q on a %s %s job", f, r.Media, r.Operation)
	}
	if r.CreatedAt.IsZero() || r.Deadline.IsZero() {
		return fail("created_at %v, deadline %v", r.CreatedAt, r.Deadline)
	}
	if r.Attempts < 0 || r.Attempts > MaxAttempts {
		return fail("attempts %d out of 0..%d", r.Attempts, MaxAttempts)
	}
	if uint64(r.Epoch) < uint64(r.Attempts) {
		return fail("epoch %d below attempts %d", r.Epoch, r.Attempts)
	}
	if (r.Status == StatusRunning) != (r.Lease != nil) {
		return fail("status %s with lease %v", r.Status, r.Lease != nil)
	}
	if r.Lease != nil && (r.Lease.Token != r.Epoch || r.Lease.WorkerID == "") {
		return fail("lease token %d at epoch %d", r.Lease.Token, r.Epoch)
	}
	if len(r.AttemptNodes) > MaxAttemptNodes {
		return fail("%d attempt nodes, at most %d", len(r.AttemptNodes), MaxAttemptNodes)
	}
	if r.Status == StatusQueued && r.Attempts != 0 {
		return fail("queued after %d attempts", r.Attempts)
	}
	if (r.Status == StatusRunning || r.Status == StatusRetrying) && r.Attempts == 0 && !r.WaitingForDisk() {
		return fail("%s without an attempt", r.Status)
	}
	if r.CancelPending && (r.Status == StatusQueued || r.Status == StatusRetrying) {
		return fail("%s with a pending cancel: the cancel fails a job that waits for a worker", r.Status)
	}
	if r.DiskWaits < 0 {
		return fail("disk waits %d", r.DiskWaits)
	}
	if r.Status == StatusRetrying && (r.Attempts >= MaxAttempts || r.NextAttemptAt.IsZero() || r.LastError == nil) {
		return fail("retrying after %d attempts, next attempt at %v, last error %v", r.Attempts, r.NextAttemptAt,
			r.LastError)
	}
	if r.Status != StatusRetrying && !r.NextAttemptAt.IsZero() {
		return fail("next attempt time while %s", r.Status)
	}
	if r.Status.Terminal() == r.CompletedAt.IsZero() {
		return fail("status %s with completed_at %v", r.Status, r.CompletedAt)
	}
	if (r.Status == StatusSucceeded) != (r.Output != nil) {
		return fail("status %s with output %v", r.Status, r.Output != nil)
	}
	if (r.Status == StatusFailed) != (r.ErrorCode != "") {
		return fail("status %s with error code %q", r.Status, r.ErrorCode)
	}
	if (r.Status == StatusSucceeded) == r.ResultExpiresAt.IsZero() {
		return fail("status %s with result_expires_at %v", r.Status, r.ResultExpiresAt)
	}
	if r.Output != nil && (r.Output.Charge < 0 || r.Output.Charge > r.CreditsHeld) {
		return fail("charge %d outside the hold of %d", r.Output.Charge, r.CreditsHeld)
	}
	st := r.Settlement
	if r.Status != StatusSucceeded && (st.AssetsWritten || st.CreditsCharged || st.StorageHandedOff) {
		return fail("success effects settled while %s", r.Status)
	}
	if r.Status != StatusFailed && st.CreditsReleased {
		return fail("credits released while %s", r.Status)
	}
	if !r.Status.Terminal() && (st.BatchNotified || st.WebhookNotified) {
		return fail("notified while %s", r.Status)
	}
	return nil
}
