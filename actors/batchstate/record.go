package batchstate

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"filigrane/actors/jobstate"
	"filigrane/internal/problem"
)

// Status is a batch's status (spec 3.2).
type Status string

// Batch statuses.
const (
	StatusDraft      Status = "draft"
	StatusStarting   Status = "starting"
	StatusProcessing Status = "processing"
	StatusAssembling Status = "assembling"
	StatusCompleted  Status = "completed"
	StatusFailed     Status = "failed"
	StatusCancelled  Status = "cancelled"
	StatusExpired    Status = "expired"
)

// Started reports whether the batch was started and has not ended.
func (s Status) Started() bool {
	return s == StatusStarting || s == StatusProcessing || s == StatusAssembling
}

// Ended reports whether s is final.
func (s Status) Ended() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled || s == StatusExpired
}

// ItemStatus is a batch item's status (spec 3.3).
type ItemStatus string

// Item statuses.
const (
	ItemPending   ItemStatus = "pending"
	ItemRejected  ItemStatus = "rejected"
	ItemQueued    ItemStatus = "queued"
	ItemRunning   ItemStatus = "running"
	ItemRetrying  ItemStatus = "retrying"
	ItemSucceeded ItemStatus = "succeeded"
	ItemFailed    ItemStatus = "failed"
)

// Active reports whether an item's job is under way.
func (s ItemStatus) Active() bool { return s == ItemQueued || s == ItemRunning || s == ItemRetrying }

// Ended reports whether an item reached its final status.
func (s ItemStatus) Ended() bool { return s == ItemRejected || s == ItemSucceeded || s == ItemFailed }

// Source is how the batch's files arrive.
type Source string

// Sources.
const (
	// SourceUploads: a JSON batch; one signed upload per item, a draft until started.
	SourceUploads Source = "uploads"
	// SourceZip: one zip sent with the request; the batch starts at once.
	SourceZip Source = "zip"
)

// ArchiveStatus is the status of the batch's results zip (spec 3.5); empty until the files are done.
type ArchiveStatus string

// Archive statuses.
const (
	ArchiveNone ArchiveStatus = ""
	// ArchiveQueued: the files are done and the archive waits for one of the node's assembly slots
	// (actors.BatchEnv.Assemblies); records written before the slots go straight to assembling.
	ArchiveQueued     ArchiveStatus = "queued"
	ArchiveAssembling ArchiveStatus = "assembling"
	ArchiveReady      ArchiveStatus = "ready"
	ArchiveTooLarge   ArchiveStatus = "too_large"
	ArchiveEmpty      ArchiveStatus = "empty"
	ArchiveFailed     ArchiveStatus = "failed"
)

// Limits of batches (spec 8).
const (
	MaxItems         = 100
	MaxFilename      = 255
	DraftLifetime    = 24 * time.Hour
	RecordRetention  = 30 * 24 * time.Hour
	ArchiveRetention = 24 * time.Hour
	// MaxArchive is the largest results zip: results above it leave the archive `too_large`.
	MaxArchive = 1_000_000_000
)

// Event types a batch sends when it ends (spec 6).
const (
	EventCompleted = "watermark.batch.completed"
	EventFailed    = "watermark.batch.failed"
	EventCancelled = "watermark.batch.cancelled"
)

// Error codes this package sets on items.
const (
	CodeCancelled           = string(problem.Cancelled)
	CodeUploadNotReceived   = string(problem.UploadNotReceived)
	CodeInsufficientCredits = string(problem.InsufficientCredits)
)

// Errors of the batch state machine; test with errors.Is.
var (
	ErrInvalid = errors.New("batchstate: invalid argument")
	// ErrExpired: the draft was not started within 24 hours (HTTP 410).
	ErrExpired = errors.New("batchstate: draft expired")
	// ErrTerminal: the item already ended another way.
	ErrTerminal = errors.New("batchstate: item already ended")
	// ErrState: the command does not apply to the batch's or item's status.
	ErrState = errors.New("batchstate: not in a state for this command")
	// ErrIdempotencyConflict: the batch key was used with other items or options (HTTP 409).
	ErrIdempotencyConflict = errors.New("batchstate: batch key reused with different items")
)

// Item is one file of the batch.
type Item struct {
	Index    int            `msgpack:"index"`
	Filename string         `msgpack:"filename"`
	Size     int64          `msgpack:"size"`
	Media    jobstate.Media `msgpack:"media"`
	// WatermarkID is the hex SHA-256 of the item's canonical data object (its job embeds it).
	WatermarkID string `msgpack:"watermark_id"`
	// UploadID is the item's signed upload (uploads batches only).
	UploadID string `msgpack:"upload_id"`
	// RequestID is the item's job, derived from the batch id and the index (ItemRequestID); the API shows it
	// once the item was accepted.
	RequestID string `msgpack:"request_id"`
	// Job is set once the item was accepted as a job (it then has a request id on the API).
	Job         bool       `msgpack:"job"`
	Status      ItemStatus `msgpack:"status"`
	ErrorCode   string     `msgpack:"error_code"`
	ErrorDetail string     `msgpack:"error_detail"`
	// Held is what the job reserved; Charge what its success cost.
	Held   int64   `msgpack:"held"`
	Charge int64   `msgpack:"charge"`
	Result *Result `msgpack:"result"`
}

// Accepted reports whether the item became a job.
func (it *Item) Accepted() bool { return it.Job }

// Credits is the item's credits as the API shows them: nil while pending, the hold while active, the charge
// once succeeded, 0 once rejected or failed.
func (it *Item) Credits() *int64 {
	var v int64
	switch {
	case it.Status == ItemPending:
		return nil
	case it.Status.Active():
		v = it.Held
	case it.Status == ItemSucceeded:
		v = it.Charge
	}
	return &v
}

// Result is what a succeeded item produced, for the archive and the manifest.
type Result struct {
	AssetID       string `msgpack:"asset_id"`
	SourceAssetID string `msgpack:"source_asset_id"`
	BlobKey       string `msgpack:"blob_key"`
	Size          int64  `msgpack:"size"`
	ContentType   string `msgpack:"content_type"`
	// Ext is the output file's extension without the dot (png, pdf, mp4).
	Ext string `msgpack:"ext"`
	// ExpiresAt is when the job's result stops being downloadable (its result_expires_at).
	ExpiresAt time.Time `msgpack:"expires_at"`
}

// Event is a batch event recorded with the write that ended the batch; Delivered is set once it was handed
// to delivery.
type Event struct {
	ID        string    `msgpack:"id"`
	Type      string    `msgpack:"type"`
	At        time.Time `msgpack:"at"`
	Delivered bool      `msgpack:"delivered"`
}

// Record is a batch's durable record (Store key batch/<batch_id>).
type Record struct {
	BatchID string `msgpack:"batch_id"`
	OrgID   string `msgpack:"org_id"`
	Source  Source `msgpack:"source"`
	Status  Status `msgpack:"status"`

	Archive              bool                 `msgpack:"archive"`
	Accelerator          jobstate.Accelerator `msgpack:"accelerator"`
	WebhookID            string               `msgpack:"webhook_id"`
	StorageDestinationID string               `msgpack:"storage_destination_id"`
	// OutputFormat is the file format of the image items' results (jpeg or webp); empty means PNG, as in
	// every record written before the option existed (omitempty: a PNG batch's record keeps its old bytes).
	// Documents and videos keep their own format.
	OutputFormat jobstate.OutputFormat `msgpack:"output_format,omitempty"`
	Idempotency  jobstate.Fingerprint  `msgpack:"idempotency"`

	// ZipBlobKey is the stored request zip (zip batches); members are unpacked from it one at a time.
	ZipBlobKey string `msgpack:"zip_blob_key"`

	Items           []Item `msgpack:"items"`
	CancelRequested bool   `msgpack:"cancel_requested"`

	CreatedAt   time.Time `msgpack:"created_at"`
	StartedAt   time.Time `msgpack:"started_at"`
	CompletedAt time.Time `msgpack:"completed_at"`

	ArchiveStatus    ArchiveStatus `msgpack:"archive_status"`
	ArchiveBlobKey   string        `msgpack:"archive_blob_key"`
	ArchiveSize      int64         `msgpack:"archive_size"`
	ArchiveExpiresAt time.Time     `msgpack:"archive_expires_at"`
	// ArchiveStartedAt is when the archive's first build began (ArchiveStarted): an archive waiting for disk
	// space counts its wait from it, so that a restart does not start the wait over. Zero, and left out of the
	// encoding, until then and in records written before it was kept.
	ArchiveStartedAt time.Time `msgpack:"archive_started_at,omitempty"`

	Events []Event `msgpack:"events"`
	// Removed marks a record reduced to its key after RecordRetention: reads answer 404, a create with the
	// same key 409.
	Removed bool `msgpack:"removed"`

	Revision uint64 `msgpack:"revision"`
}

// SchemaVersion is the layout version of stored batch records.
func (*Record) SchemaVersion() uint16 { return 1 }

func (r *Record) changed() { r.Revision++ }

// ItemSpec is one validated file of a create request.
type ItemSpec struct {
	Filename    string
	Size        int64 // declared (uploads) or unpacked (zip) bytes
	Media       jobstate.Media
	WatermarkID string
}

// Spec is a validated create request.
type Spec struct {
	BatchID              string
	OrgID                string
	Source               Source
	Archive              bool
	Accelerator          jobstate.Accelerator
	WebhookID            string
	StorageDestinationID string
	// OutputFormat is the image items' output format (output_format); empty or png is PNG.
	OutputFormat   jobstate.OutputFormat
	IdempotencyKey string
	Items          []ItemSpec
	// ZipBlobKey and ZipSHA256 describe the stored zip of a zip batch; the digest is part of the fingerprint
	// (spec 4.4: "same key and zip again: 200").
	ZipBlobKey string
	ZipSHA256  string
}

// BatchIDFor is the batch id of a create request of orgID with idemKey: `bat_` + 32 hex, derived so that
// every replay reaches the same batch actor.
func BatchIDFor(orgID, idemKey string) string {
	sum := sha256.Sum256([]byte("filigrane/batch\x00" + orgID + "\x00" + idemKey))
	return "bat_" + hex.EncodeToString(sum[:16])
}

// ItemRequestID is the request id of item index's job: derived, so that a batch actor that crashed between
// submitting the job and recording it submits the same job again (a replay, not a second job).
func ItemRequestID(batchID string, index int) string {
	sum := sha256.Sum256([]byte("filigrane/batch-item\x00" + batchID + "\x00" + strconv.Itoa(index)))
	return "req_" + hex.EncodeToString(sum[:])
}

// ItemUploadID is the upload id of item index of an uploads batch (derived for the same reason).
func ItemUploadID(batchID string, index int) string {
	sum := sha256.Sum256([]byte("filigrane/batch-upload\x00" + batchID + "\x00" + strconv.Itoa(index)))
	return "upl_" + hex.EncodeToString(sum[:16])
}

// ItemIdempotencyKey is the Idempotency-Key the item's job is submitted with, so that a repeated submit is
// recognised as the same request by the job actor.
func ItemIdempotencyKey(batchID string, index int) string {
	return "batch-" + strings.TrimPrefix(batchID, "bat_") + "-" + strconv.Itoa(index)
}

// ValidBatchID reports whether id is `bat_` + 32 lowercase hex.
func ValidBatchID(id string) bool {
	rest, ok := strings.CutPrefix(id, "bat_")
	if !ok || len(rest) != 32 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

const fingerprintDomain = "filigrane/batch-fingerprint/v1"

// Fingerprint is the idempotency fingerprint of s: the key and a hash over every option and item.
func (s Spec) Fingerprint() (jobstate.Fingerprint, error) {
	if !jobstate.ValidIdempotencyKey(s.IdempotencyKey) {
		return jobstate.Fingerprint{}, fmt.Errorf("idempotency key %q: %w", s.IdempotencyKey, ErrInvalid)
	}
	accel := s.Accelerator
	if accel == "" {
		accel = jobstate.AcceleratorCPU
	}
	h := sha256.New()
	for _, f := range []string{fingerprintDomain, string(s.Source), strconv.FormatBool(s.Archive), string(accel),
		s.WebhookID, s.StorageDestinationID, strings.ToLower(s.ZipSHA256), strconv.Itoa(len(s.Items))} {
		field(h, f)
	}
	for _, it := range s.Items {
		field(h, it.Filename)
		field(h, strconv.FormatInt(it.Size, 10))
		field(h, string(it.Media))
		field(h, strings.ToLower(it.WatermarkID))
	}
	// Added after the fields above, and only for another format than PNG: a PNG batch fingerprints as it did
	// before the option existed, so its old record keeps matching its replays. The item count comes before
	// the items, so these two fields cannot be mistaken for an item's.
	if f := storedFormat(s.OutputFormat); f != "" {
		field(h, "output_format")
		field(h, string(f))
	}
	return jobstate.Fingerprint{Key: s.IdempotencyKey, Hash: hex.EncodeToString(h.Sum(nil))}, nil
}

// storedFormat is f as records and fingerprints keep it: empty for PNG (spelled or not).
func storedFormat(f jobstate.OutputFormat) jobstate.OutputFormat {
	if f.OrPNG() == jobstate.OutputPNG {
		return ""
	}
	return f
}

func field(h hash.Hash, s string) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
	h.Write([]byte(s))
}

func (s Spec) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("batch %s: %s: %w", s.BatchID, fmt.Sprintf(format, args...), ErrInvalid)
	}
	if !ValidBatchID(s.BatchID) || s.OrgID == "" {
		return bad("identity %q of organization %q", s.BatchID, s.OrgID)
	}
	if s.Source != SourceUploads && s.Source != SourceZip {
		return bad("source %q", s.Source)
	}
	if s.Source == SourceZip && (s.ZipBlobKey == "" || !jobstate.ValidHex(s.ZipSHA256, 64)) {
		return bad("a zip batch needs its stored zip")
	}
	if _, err := jobstate.ParseAccelerator(string(s.Accelerator)); err != nil {
		return bad("%v", err)
	}
	if f, err := jobstate.ParseOutputFormat(string(s.OutputFormat)); err != nil || f != s.OutputFormat.OrPNG() {
		return bad("output format %q (want png, jpeg or webp)", s.OutputFormat)
	}
	if s.Archive && s.StorageDestinationID != "" {
		return bad("archive cannot be combined with storage_destination_id")
	}
	if len(s.Items) < 1 || len(s.Items) > MaxItems {
		return bad("%d items; a batch has 1 to %d", len(s.Items), MaxItems)
	}
	seen := make(map[string]bool, len(s.Items))
	for i, it := range s.Items {
		if it.Filename == "" || utf8.RuneCountInString(it.Filename) > MaxFilename || !utf8.ValidString(it.Filename) {
			return bad("item %d: filename must be 1 to %d characters", i, MaxFilename)
		}
		if s.Source == SourceZip && seen[it.Filename] {
			return bad("item %d: %q is listed twice", i, it.Filename)
		}
		seen[it.Filename] = true
		if _, err := jobstate.ParseMedia(string(it.Media)); err != nil {
			return bad("item %d: %v", i, err)
		}
		if s.Source == SourceUploads && it.Size <= 0 {
			return bad("item %d: size %d", i, it.Size)
		}
		if !jobstate.ValidHex(it.WatermarkID, 64) {
			return bad("item %d: watermark id %q", i, it.WatermarkID)
		}
	}
	return nil
}

// New creates the record of a validated create request at now: a draft for an uploads batch (one upload per
// item, ItemUploadID), a batch already starting for a zip batch.
func New(s Spec, now time.Time) (*Record, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	fp, err := s.Fingerprint()
	if err != nil {
		return nil, err
	}
	now = now.UTC()
	accel := s.Accelerator
	if accel == "" {
		accel = jobstate.AcceleratorCPU
	}
	r := &Record{
		BatchID: s.BatchID, OrgID: s.OrgID, Source: s.Source, Status: StatusDraft, Archive: s.Archive,
		Accelerator: accel, WebhookID: s.WebhookID, StorageDestinationID: s.StorageDestinationID,
		OutputFormat: storedFormat(s.OutputFormat), Idempotency: fp, ZipBlobKey: s.ZipBlobKey, CreatedAt: now, Revision: 1,
		Items: make([]Item, len(s.Items)),
	}
	for i, it := range s.Items {
		r.Items[i] = Item{Index: i, Filename: it.Filename, Size: it.Size, Media: it.Media,
			WatermarkID: strings.ToLower(it.WatermarkID), RequestID: ItemRequestID(s.BatchID, i), Status: ItemPending}
		if s.Source == SourceUploads {
			r.Items[i].UploadID = ItemUploadID(s.BatchID, i)
		}
	}
	if s.Source == SourceZip {
		r.Status, r.StartedAt = StatusStarting, now
	}
	return r, nil
}

// Clone returns a deep copy, so that a command can be tried without touching the committed record.
func (r *Record) Clone() *Record {
	c := *r
	c.Items = make([]Item, len(r.Items))
	for i, it := range r.Items {
		if it.Result != nil {
			res := *it.Result
			it.Result = &res
		}
		c.Items[i] = it
	}
	c.Events = append([]Event(nil), r.Events...)
	return &c
}

// CheckReplay decides a create request that reached this batch with fingerprint fp: nil means the same
// request (answer this batch); ErrIdempotencyConflict means other items or options, or a removed record.
func (r *Record) CheckReplay(fp jobstate.Fingerprint) error {
	if r.Removed {
		return fmt.Errorf("batch %s was removed after %s: %w", r.BatchID, RecordRetention, ErrIdempotencyConflict)
	}
	if !r.Idempotency.Matches(fp) {
		return fmt.Errorf("batch %s: %w", r.BatchID, ErrIdempotencyConflict)
	}
	return nil
}

// DraftExpiresAt is when an unstarted draft expires.
func (r *Record) DraftExpiresAt() time.Time { return r.CreatedAt.Add(DraftLifetime) }

// RetainUntil is when the record is reduced to a tombstone.
func (r *Record) RetainUntil() time.Time { return r.CreatedAt.Add(RecordRetention) }

// Validate checks the record's invariants after loading.
func (r *Record) Validate() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("batch record %s: %s: %w", r.BatchID, fmt.Sprintf(format, args...), ErrInvalid)
	}
	if !ValidBatchID(r.BatchID) || r.OrgID == "" {
		return fail("identity")
	}
	if r.Removed {
		return nil
	}
	if !r.Status.Started() && !r.Status.Ended() && r.Status != StatusDraft {
		return fail("status %q", r.Status)
	}
	for i, it := range r.Items {
		if it.Index != i {
			return fail("item %d at position %d", it.Index, i)
		}
		if (it.Status == ItemSucceeded) != (it.Result != nil) {
			return fail("item %d %s with result %v", i, it.Status, it.Result != nil)
		}
		if (it.Status == ItemRejected || it.Status == ItemFailed) != (it.ErrorCode != "") {
			return fail("item %d %s with error code %q", i, it.Status, it.ErrorCode)
		}
		if r.Status == StatusDraft && it.Status != ItemPending {
			return fail("item %d %s in a draft", i, it.Status)
		}
		if r.Status.Ended() && r.Status != StatusExpired && r.Status != StatusCancelled && !it.Status.Ended() {
			return fail("item %d %s in an ended batch", i, it.Status)
		}
	}
	if f := r.OutputFormat; f != "" && f != jobstate.OutputJPEG && f != jobstate.OutputWebP {
		return fail("output format %q", f)
	}
	if r.Status.Ended() == r.CompletedAt.IsZero() {
		return fail("status %s with completed_at %v", r.Status, r.CompletedAt)
	}
	return nil
}
