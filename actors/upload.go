package actors

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
)

// UploadKind is what an upload was created for (spec 4.3): embedding an image, document or video, or a
// detection of any media.
type UploadKind string

// Upload kinds.
const (
	UploadImage    UploadKind = "image"
	UploadDocument UploadKind = "document"
	UploadVideo    UploadKind = "video"
	UploadDetect   UploadKind = "detect"
)

// UploadMedia is the media an upload holds: the kind itself for embed uploads, the filename's extension for
// detect uploads.
type UploadMedia string

// Upload media.
const (
	MediaImage    UploadMedia = "image"
	MediaDocument UploadMedia = "document"
	MediaVideo    UploadMedia = "video"
)

// UploadStatus is the status of an upload (spec 3.4).
type UploadStatus string

// Upload statuses.
const (
	UploadPending  UploadStatus = "pending"
	UploadReceived UploadStatus = "received"
	UploadConsumed UploadStatus = "consumed"
	UploadRejected UploadStatus = "rejected"
	UploadExpired  UploadStatus = "expired"
)

// Upload time limits (spec 8): the signed URL is valid 6 hours, the upload is kept 24 hours.
const (
	UploadURLValidity = 6 * time.Hour
	UploadRetention   = 24 * time.Hour
	// UploadClaimLease is how long a request holds an upload it claimed before another request may take it.
	// It covers the longest request that settles an upload (a synchronous embed waits 20 s, a synchronous
	// detection of a 95 MB image runs under the request's 5-minute budget) while still freeing an upload
	// whose request died without settling.
	UploadClaimLease = 6 * time.Minute
	// maxUploadFilename bounds the declared filename in bytes.
	maxUploadFilename = 255
)

// Errors of the upload state machine. The http package maps each to its status and problem code.
var (
	ErrUploadInvalid     = errors.New("invalid upload")
	ErrUploadTooLarge    = errors.New("upload larger than its kind allows")
	ErrUploadNotFound    = errors.New("no such upload")
	ErrUploadExpired     = errors.New("upload expired")
	ErrUploadNotPending  = errors.New("upload file already received")
	ErrUploadNotReceived = errors.New("upload file not received yet")
	ErrUploadInUse       = errors.New("upload in use by another request")
	ErrUploadConsumed    = errors.New("upload used by another request")
	ErrUploadRejected    = errors.New("upload rejected")
	ErrUploadKind        = errors.New("upload created for another kind of request")
	ErrUploadSize        = errors.New("file size differs from the declared size")
)

// MaxUploadSize is the largest file any upload may declare; the upload host refuses larger bodies before
// routing them.
const MaxUploadSize = 192_000_000

// UploadLimit is the largest file an upload of kind and media may hold.
// It reads the media-kind table: an embed upload holds its own kind's media only, a detect upload any kind's.
func UploadLimit(kind UploadKind, media UploadMedia) int64 {
	k, ok := mediakind.ByMedia(jobstate.Media(media))
	switch {
	case !ok:
		return 0
	case kind == UploadDetect:
		return k.Limits.UploadDetect
	case UploadMedia(kind) == media:
		return k.Limits.UploadEmbed
	}
	return 0
}

// UploadLock is a request's claim on a received upload.
type UploadLock struct {
	RequestID string    `msgpack:"request_id"`
	Until     time.Time `msgpack:"until"`
}

// UploadPut is the lease of the one PUT that is sending an upload's file. A second PUT is refused while it
// holds; a PUT that died with its node (and never released it) stops holding once Until has passed.
type UploadPut struct {
	Token string    `msgpack:"token"`
	Until time.Time `msgpack:"until"`
	// Node and Member name the cluster member whose upload host runs the PUT ("" when unknown): a PUT whose
	// member the cluster knows to be gone (its node died mid-body) holds the upload no longer.
	Node   string `msgpack:"node,omitempty"`
	Member string `msgpack:"member,omitempty"`
}

// PutHolder is the cluster member running a PUT, and the cluster's view of which members are gone (nil: none
// is known gone, and a PUT's lease runs to its end).
type PutHolder struct {
	Node, Member string
	Gone         func(node, member string) bool
}

// UploadPutLease is how long a PUT's lease lasts after its last renewal; a PUT renews it while its body
// moves.
const UploadPutLease = time.Minute

// Upload is the durable record of an upload (Store key upload/<upload_id>).
type Upload struct {
	ID           string       `msgpack:"id"`
	OrgID        string       `msgpack:"org_id"`
	Kind         UploadKind   `msgpack:"kind"`
	Media        UploadMedia  `msgpack:"media"`
	Filename     string       `msgpack:"filename"`
	Size         int64        `msgpack:"size"`
	Status       UploadStatus `msgpack:"status"`
	CreatedAt    time.Time    `msgpack:"created_at"`
	URLExpiresAt time.Time    `msgpack:"url_expires_at"`
	// ExpiresAt is when an unused upload expires (created + 24 h).
	ExpiresAt  time.Time  `msgpack:"expires_at"`
	ReceivedAt *time.Time `msgpack:"received_at,omitempty"`
	// BlobKey and SHA256 describe the received file.
	BlobKey string `msgpack:"blob_key,omitempty"`
	SHA256  string `msgpack:"sha256,omitempty"`
	// Lock is set while a request uses the upload.
	Lock *UploadLock `msgpack:"lock,omitempty"`
	// Put is set while a PUT sends the file.
	Put *UploadPut `msgpack:"put,omitempty"`
	// RequestID is the request that consumed the upload.
	RequestID  string     `msgpack:"request_id,omitempty"`
	ConsumedAt *time.Time `msgpack:"consumed_at,omitempty"`
	// ErrorCode and Error say why the upload was rejected: the problem a direct request with the file gets.
	ErrorCode string `msgpack:"error_code,omitempty"`
	Error     string `msgpack:"error,omitempty"`
	// BatchID and ForRequest are set on the upload of a batch item: only that item's job request may use it
	// (spec 2.4: "valid only for that batch").
	BatchID    string `msgpack:"batch_id,omitempty"`
	ForRequest string `msgpack:"for_request,omitempty"`
	// FileDeleted is set once the sweeper deleted the file (expired, rejected, or consumed without a job).
	FileDeleted bool `msgpack:"file_deleted,omitempty"`
	// Revision counts changes; a command that changes nothing leaves it, and the caller skips the write.
	Revision uint64 `msgpack:"revision"`
}

// SchemaVersion implements persistence.Record.
func (*Upload) SchemaVersion() uint16 { return 1 }

// Clone returns a deep copy, so that a command can be tried on it and dropped on error.
func (u *Upload) Clone() *Upload {
	c := *u
	if u.ReceivedAt != nil {
		t := *u.ReceivedAt
		c.ReceivedAt = &t
	}
	if u.ConsumedAt != nil {
		t := *u.ConsumedAt
		c.ConsumedAt = &t
	}
	if u.Lock != nil {
		l := *u.Lock
		c.Lock = &l
	}
	if u.Put != nil {
		p := *u.Put
		c.Put = &p
	}
	return &c
}

// NewUploadID returns a fresh upload id: upl_ and 32 hex characters.
func NewUploadID() string { return newID("upl_", 16) }

// ValidUploadID reports whether s has the form of an upload id, so that junk never reaches the Store.
func ValidUploadID(s string) bool {
	if len(s) != 4+32 || !strings.HasPrefix(s, "upl_") {
		return false
	}
	for _, c := range s[4:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ParseUploadKind validates a kind.
func ParseUploadKind(s string) (UploadKind, error) {
	switch k := UploadKind(s); k {
	case UploadImage, UploadDocument, UploadVideo, UploadDetect:
		return k, nil
	}
	return "", fmt.Errorf("%w: kind must be image, document, video or detect", ErrUploadInvalid)
}

// UploadMediaOf is the media an upload of kind named filename holds: the kind for embed uploads, the
// filename's extension for detect uploads.
func UploadMediaOf(kind UploadKind, filename string) (UploadMedia, error) {
	switch kind {
	case UploadImage:
		return MediaImage, nil
	case UploadDocument:
		return MediaDocument, nil
	case UploadVideo:
		return MediaVideo, nil
	case UploadDetect:
		// A detect upload has no kind of its own, and its size limit depends on the media, so it is decided up
		// front from the name the client declares; the endpoint that uses the upload must then be the one for
		// that media.
		if k, ok := mediakind.ByFilename(filename); ok {
			return UploadMedia(k.Media), nil
		}
		return "", fmt.Errorf("%w: a detect upload's filename needs the extension of an image (.jpg, .png, .webp, .gif, .tiff, .bmp, .ppm, .pgm), a PDF (.pdf) or a video (.mp4, .mov, .m4v)", ErrUploadInvalid)
	}
	return "", fmt.Errorf("%w: unknown kind %q", ErrUploadInvalid, kind)
}

// validUploadFilename: non-empty, at most 255 bytes of valid UTF-8 without control characters or path
// separators (the name is only a label and a source of the media type, never a path).
func validUploadFilename(s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return fmt.Errorf("%w: filename must not be empty", ErrUploadInvalid)
	case len(s) > maxUploadFilename:
		return fmt.Errorf("%w: filename exceeds %d bytes", ErrUploadInvalid, maxUploadFilename)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: filename is not valid UTF-8", ErrUploadInvalid)
	case strings.ContainsAny(s, "/\\"):
		return fmt.Errorf("%w: filename must not contain a path", ErrUploadInvalid)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: filename contains a control character", ErrUploadInvalid)
		}
	}
	return nil
}

// NewUpload checks a declared upload and returns its pending record. ErrUploadInvalid wraps bad fields,
// ErrUploadTooLarge a size above the kind's limit.
func NewUpload(id, orgID string, kind UploadKind, filename string, size int64, now time.Time) (*Upload, error) {
	if _, err := ParseUploadKind(string(kind)); err != nil {
		return nil, err
	}
	if err := validUploadFilename(filename); err != nil {
		return nil, err
	}
	media, err := UploadMediaOf(kind, filename)
	if err != nil {
		return nil, err
	}
	if size <= 0 {
		return nil, fmt.Errorf("%w: size must be a positive number of bytes", ErrUploadInvalid)
	}
	if limit := UploadLimit(kind, media); size > limit {
		what := "an " + string(kind) + " upload"
		if kind != UploadImage {
			what = "a " + string(kind) + " upload"
		}
		if kind == UploadDetect {
			what += " of " + string(media)
		}
		return nil, fmt.Errorf("%w: %s holds at most %d bytes", ErrUploadTooLarge, what, limit)
	}
	return &Upload{
		ID: id, OrgID: orgID, Kind: kind, Media: media, Filename: filename, Size: size, Status: UploadPending,
		CreatedAt: now, URLExpiresAt: now.Add(UploadURLValidity), ExpiresAt: now.Add(UploadRetention), Revision: 1,
	}, nil
}

// unused reports whether no request consumed the upload and it was not rejected.
func (u *Upload) unused() bool { return u.Status == UploadPending || u.Status == UploadReceived }

// StatusAt is the status a reader sees at now: an unused upload past its 24 hours is expired even before the
// sweeper records it.
func (u *Upload) StatusAt(now time.Time) UploadStatus {
	if u.unused() && !now.Before(u.ExpiresAt) {
		return UploadExpired
	}
	return u.Status
}

// Receive records the file of a pending upload.
func (u *Upload) Receive(blobKey, sha256 string, size int64, now time.Time) error {
	switch u.StatusAt(now) {
	case UploadPending:
	case UploadExpired:
		return ErrUploadExpired
	default:
		return ErrUploadNotPending
	}
	if size != u.Size {
		return fmt.Errorf("%w: received %d bytes, declared %d", ErrUploadSize, size, u.Size)
	}
	t := now
	u.Status, u.BlobKey, u.SHA256, u.ReceivedAt, u.Put = UploadReceived, blobKey, sha256, &t, nil
	u.Revision++
	return nil
}

// ErrUploadPutLost: a PUT's lease lapsed and another PUT took the upload over.
var ErrUploadPutLost = errors.New("upload PUT lease lost to another PUT")

// BeginPut gives the PUT identified by token, which holder's member runs, the right to send the file until
// now+lease; a pending upload is required. Another PUT's live lease refuses it with ErrUploadInUse unless that
// PUT's member is gone: a node killed mid-body held the upload for a whole lease (a minute), and a client
// retrying through another node got 409 upload_in_use meanwhile (`bench chaos` with batches, two of five
// nodes killed: a batch waited 60 s). A zero holder names no member, and its lease runs to its end.
func (u *Upload) BeginPut(token string, holder PutHolder, now time.Time, lease time.Duration) error {
	switch u.StatusAt(now) {
	case UploadPending:
	case UploadExpired:
		return ErrUploadExpired
	default:
		return ErrUploadNotPending
	}
	if p := u.Put; p != nil && p.Token != token && now.Before(p.Until) &&
		!(holder.Gone != nil && p.Member != "" && holder.Gone(p.Node, p.Member)) {
		return ErrUploadInUse
	}
	u.Put = &UploadPut{Token: token, Until: now.Add(lease), Node: holder.Node, Member: holder.Member}
	u.Revision++
	return nil
}

// RenewPut extends the lease of the PUT identified by token; ErrUploadPutLost when it no longer holds it.
func (u *Upload) RenewPut(token string, now time.Time, lease time.Duration) error {
	if u.Status != UploadPending || u.Put == nil || u.Put.Token != token {
		return ErrUploadPutLost
	}
	u.Put.Until = now.Add(lease)
	u.Revision++
	return nil
}

// EndPut releases the lease of the PUT identified by token, if it still holds it.
func (u *Upload) EndPut(token string) {
	if u.Put != nil && u.Put.Token == token {
		u.Put = nil
		u.Revision++
	}
}

// Claim locks the upload for request requestID, which wants an upload of kind holding media. The request
// that consumed the upload may claim it again (a replay with the same Idempotency-Key gets its original job);
// that claim changes nothing.
func (u *Upload) Claim(requestID string, kind UploadKind, media UploadMedia, now time.Time) error {
	if u.Kind != kind || u.Media != media {
		return fmt.Errorf("%w: this is a %s upload of %s", ErrUploadKind, u.Kind, u.Media)
	}
	if u.ForRequest != "" && u.ForRequest != requestID {
		return fmt.Errorf("%w: this upload belongs to an item of batch %s", ErrUploadKind, u.BatchID)
	}
	switch u.StatusAt(now) {
	case UploadPending:
		return ErrUploadNotReceived
	case UploadExpired:
		return ErrUploadExpired
	case UploadRejected:
		return fmt.Errorf("%w: %s", ErrUploadRejected, u.Error)
	case UploadConsumed:
		if u.RequestID == requestID {
			return nil
		}
		return ErrUploadConsumed
	}
	if u.Lock != nil && u.Lock.RequestID != requestID && now.Before(u.Lock.Until) {
		return ErrUploadInUse
	}
	u.Lock = &UploadLock{RequestID: requestID, Until: now.Add(UploadClaimLease)}
	u.Revision++
	return nil
}

// Consume records that requestID used the upload. A repeat by the same request changes nothing. A request
// whose lease lapsed still consumes a received upload: its job exists and owns the file.
func (u *Upload) Consume(requestID string, now time.Time) error {
	switch u.Status {
	case UploadConsumed:
		if u.RequestID == requestID {
			return nil
		}
		return ErrUploadConsumed
	case UploadReceived:
	default:
		return fmt.Errorf("%w: status %s", ErrUploadNotReceived, u.Status)
	}
	if u.Lock != nil && u.Lock.RequestID != requestID && now.Before(u.Lock.Until) {
		return ErrUploadInUse
	}
	t := now
	u.Status, u.RequestID, u.ConsumedAt, u.Lock = UploadConsumed, requestID, &t, nil
	u.Revision++
	return nil
}

// Release drops requestID's lock after a refusal that can be retried; the upload stays usable. Without that
// lock there is nothing to release.
func (u *Upload) Release(requestID string) error {
	if u.Lock == nil || u.Lock.RequestID != requestID {
		return nil
	}
	u.Lock = nil
	u.Revision++
	return nil
}

// Reject records that the file cannot be used, with the problem a direct request would get. Only the request
// holding the lock on a received upload may reject it; anything else changes nothing (a failed replay of a
// consumed upload does not undo its use).
func (u *Upload) Reject(requestID, code, detail string) error {
	if u.Status != UploadReceived || u.Lock == nil || u.Lock.RequestID != requestID {
		return nil
	}
	u.Status, u.ErrorCode, u.Error, u.Lock = UploadRejected, code, detail, nil
	u.Revision++
	return nil
}

// Expire records that an unused upload passed its 24 hours.
func (u *Upload) Expire(now time.Time) error {
	if u.StatusAt(now) != UploadExpired || u.Status == UploadExpired {
		return nil
	}
	u.Status, u.Lock = UploadExpired, nil
	u.Revision++
	return nil
}

// MarkFileDeleted records that the sweeper deleted the file.
func (u *Upload) MarkFileDeleted() {
	if !u.FileDeleted {
		u.FileDeleted = true
		u.Revision++
	}
}
