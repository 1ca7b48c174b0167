// Package storagedest owns an organization's storage destinations: S3-compatible buckets of the customer's
// own into which embedding results are delivered (spec 2.6, 4.1). It stores the destinations (at most
// MaxPerOrg per organization, in one record per organization, so the limit and the names are checked in one
// compare-and-set), seals their secret keys at rest with AES-GCM (Sealer), verifies a destination with a probe
// round trip, and writes delivered objects with a conditional create.
//
// Every connection to a customer endpoint goes through an egress.Guard (no private, loopback or metadata
// targets unless the operator's development option allows private ones). It must not decide what is
// delivered when (the job outbox handler in internal/node does), and it never returns or logs a secret.
//
// Storage keys (docs/ARCHITECTURE.md):
//
//	storage/dst/<org id> -> Set (every destination of the organization)
package storagedest

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"filigrane/actors/durable"
	"filigrane/internal/egress"
	"filigrane/internal/hiddenchar"
	"filigrane/persistence"
)

// MaxPerOrg bounds the destinations of one organization (spec: at most 10).
const MaxPerOrg = 10

// Errors of the management calls; the HTTP layer maps them to problem codes.
var (
	ErrNotFound = errors.New("storage destination not found")
	ErrLimit    = fmt.Errorf("an organization has at most %d storage destinations", MaxPerOrg)
	ErrInvalid  = errors.New("invalid storage destination")
)

// Destination is one stored destination. SealedSecret is the secret key sealed by a Sealer; it never leaves
// this package in clear except to sign requests.
type Destination struct {
	ID           string     `msgpack:"id"`
	Name         string     `msgpack:"name"`
	Endpoint     string     `msgpack:"endpoint"` // host[:port]
	Secure       bool       `msgpack:"secure"`   // https
	Region       string     `msgpack:"region"`
	Bucket       string     `msgpack:"bucket"`
	Prefix       string     `msgpack:"prefix"`
	PathStyle    bool       `msgpack:"path_style"`
	AccessKey    string     `msgpack:"access_key"`
	SealedSecret []byte     `msgpack:"sealed_secret"`
	Enabled      bool       `msgpack:"enabled"`
	CreatedAt    time.Time  `msgpack:"created_at"`
	UpdatedAt    time.Time  `msgpack:"updated_at"`
	VerifiedAt   *time.Time `msgpack:"verified_at,omitempty"`
	LastError    string     `msgpack:"last_error,omitempty"`
}

// Usable reports whether a request may name the destination: enabled and verified since its last change.
func (d *Destination) Usable() bool { return d.Enabled && d.VerifiedAt != nil }

// Set is the stored record of one organization's destinations.
type Set struct {
	Destinations []Destination `msgpack:"destinations"`
}

// SchemaVersion implements persistence.Record.
func (*Set) SchemaVersion() uint16 { return 1 }

func (s *Set) find(id string) int {
	for i := range s.Destinations {
		if s.Destinations[i].ID == id {
			return i
		}
	}
	return -1
}

func (s *Set) clone() *Set {
	if s == nil {
		return &Set{}
	}
	return &Set{Destinations: append([]Destination(nil), s.Destinations...)}
}

func key(org string) []byte { return []byte("storage/dst/" + org) }

// Sealer seals secrets with AES-256-GCM; the destination id is the additional data, so a sealed secret
// copied onto another destination does not open.
type Sealer struct{ aead cipher.AEAD }

// NewSealer takes a 32-byte key.
func NewSealer(k []byte) (*Sealer, error) {
	if len(k) != 32 {
		return nil, fmt.Errorf("storage secret key: want 32 bytes, got %d", len(k))
	}
	b, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: g}, nil
}

// Seal returns nonce || ciphertext.
func (s *Sealer) Seal(id, secret string) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return s.aead.Seal(nonce, nonce, []byte(secret), []byte(id)), nil
}

// Open reverses Seal.
func (s *Sealer) Open(id string, sealed []byte) (string, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return "", errors.New("sealed secret too short")
	}
	p, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(id))
	if err != nil {
		return "", fmt.Errorf("open the sealed secret of %s (wrong storage secret key?): %w", id, err)
	}
	return string(p), nil
}

// Library is the destinations of every organization in the Store, plus what it needs to reach buckets.
type Library struct {
	Store  persistence.Store
	Sealer *Sealer
	Guard  *egress.Guard
}

// Input is a create or update request, already parsed. Empty strings leave a field unchanged on update.
type Input struct {
	Name, Endpoint, Region, Bucket, Prefix, AccessKey, SecretKey string
	Secure, PathStyle                                            *bool
	Enabled                                                      *bool
}

// NewID returns "dst_" + 32 hex characters.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "dst_" + hex.EncodeToString(b[:])
}

// checkHidden refuses a field a request sends that holds a character which shows nothing or reorders the text
// around it (internal/hiddenchar's rule for names; the spaces some fields may not hold are validate's): the API
// and the console show them all but the secret. Only the fields sent are checked, so a destination stored
// before the rule can still be changed otherwise.
func checkHidden(in Input) error {
	for _, f := range []struct{ field, v string }{{"name", in.Name}, {"prefix", in.Prefix},
		{"endpoint", in.Endpoint}, {"region", in.Region}, {"bucket", in.Bucket}, {"access_key_id", in.AccessKey}} {
		if err := hiddenchar.Name(fmt.Errorf("%w: %s", ErrInvalid, f.field), f.v); err != nil {
			return err
		}
	}
	return nil
}

func validate(d *Destination) error {
	switch {
	case d.Endpoint == "" || strings.ContainsAny(d.Endpoint, "/ ?#@"):
		return fmt.Errorf("%w: endpoint must be host or host:port (no scheme, path or user)", ErrInvalid)
	case len(d.Bucket) < 3 || len(d.Bucket) > 63 || strings.ContainsAny(d.Bucket, "/ "):
		return fmt.Errorf("%w: bucket must be 3 to 63 characters without '/' or spaces", ErrInvalid)
	case len(d.Prefix) > 512 || strings.HasPrefix(d.Prefix, "/") || strings.Contains(d.Prefix, ".."):
		return fmt.Errorf("%w: prefix must be at most 512 bytes, relative, without '..'", ErrInvalid)
	case d.AccessKey == "" || len(d.SealedSecret) == 0:
		return fmt.Errorf("%w: access_key_id and secret_access_key (or credentials) are required", ErrInvalid)
	case len(d.Name) > 200 || len(d.Region) > 64 || len(d.AccessKey) > 256:
		return fmt.Errorf("%w: name (200), region (64) or access_key_id (256) too long", ErrInvalid)
	}
	return nil
}

// List returns the organization's destinations in creation order.
func (l *Library) List(ctx context.Context, org string) ([]Destination, error) {
	set, _, err := durable.Read[Set](ctx, l.Store, key(org))
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return set.Destinations, nil
}

// Get returns one destination; ErrNotFound when there is none.
func (l *Library) Get(ctx context.Context, org, id string) (*Destination, error) {
	ds, err := l.List(ctx, org)
	if err != nil {
		return nil, err
	}
	for i := range ds {
		if ds[i].ID == id {
			return &ds[i], nil
		}
	}
	return nil, ErrNotFound
}

// apply sets the fields in sends on d (empty strings and nil flags leave a field as it is), seals a new
// secret, and validates the result: the one place where create and update turn input into a destination.
func (l *Library) apply(d *Destination, in Input) error {
	if err := checkHidden(in); err != nil {
		return err
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&d.Name, in.Name)
	set(&d.Endpoint, in.Endpoint)
	set(&d.Region, in.Region)
	set(&d.Bucket, in.Bucket)
	set(&d.AccessKey, in.AccessKey)
	if in.Prefix != "" {
		d.Prefix = strings.TrimSuffix(in.Prefix, "/")
	}
	for _, f := range []struct {
		dst *bool
		v   *bool
	}{{&d.Secure, in.Secure}, {&d.PathStyle, in.PathStyle}, {&d.Enabled, in.Enabled}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if in.SecretKey != "" {
		sealed, err := l.Sealer.Seal(d.ID, in.SecretKey)
		if err != nil {
			return err
		}
		d.SealedSecret = sealed
	}
	return validate(d)
}

// Create stores a new destination (unverified).
func (l *Library) Create(ctx context.Context, org string, in Input, now time.Time) (*Destination, error) {
	// HTTPS unless the caller says otherwise: Etchv's SDKs never send secure, and a destination they create
	// must not send results and signed requests in the clear.
	d := Destination{ID: NewID(), Enabled: true, Secure: true, CreatedAt: now, UpdatedAt: now}
	if err := l.apply(&d, in); err != nil {
		return nil, err
	}
	_, err := durable.Update(ctx, l.Store, key(org), 0, func(cur *Set) (*Set, error) {
		if cur != nil && len(cur.Destinations) >= MaxPerOrg {
			return nil, ErrLimit
		}
		next := cur.clone()
		next.Destinations = append(next.Destinations, d)
		return next, nil
	})
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// Update changes a destination. A change of where or how it connects clears its verification.
func (l *Library) Update(ctx context.Context, org, id string, in Input, now time.Time) (*Destination, error) {
	var out Destination
	err := l.edit(ctx, org, id, func(next *Set, i int) error {
		d := next.Destinations[i]
		before := d
		if err := l.apply(&d, in); err != nil {
			return err
		}
		if d.Endpoint != before.Endpoint || d.Region != before.Region || d.Bucket != before.Bucket ||
			d.Prefix != before.Prefix || d.AccessKey != before.AccessKey || in.SecretKey != "" ||
			d.Secure != before.Secure || d.PathStyle != before.PathStyle {
			d.VerifiedAt = nil
		}
		d.UpdatedAt = now
		next.Destinations[i] = d
		out = d
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Delete removes a destination. Objects already delivered stay in the customer's bucket.
func (l *Library) Delete(ctx context.Context, org, id string) error {
	return l.edit(ctx, org, id, func(next *Set, i int) error {
		next.Destinations = append(next.Destinations[:i:i], next.Destinations[i+1:]...)
		return nil
	})
}

func (l *Library) record(ctx context.Context, org, id string, fn func(d *Destination)) (*Destination, error) {
	var out Destination
	err := l.edit(ctx, org, id, func(next *Set, i int) error {
		fn(&next.Destinations[i])
		out = next.Destinations[i]
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// edit changes destination id of org in one compare-and-set of the organization's set: fn gets a copy of the
// set and the destination's index in it, and may be called again when another writer won the race. A
// destination that is not there is ErrNotFound; an error of fn changes nothing.
func (l *Library) edit(ctx context.Context, org, id string, fn func(next *Set, i int) error) error {
	_, err := durable.Update(ctx, l.Store, key(org), 0, func(cur *Set) (*Set, error) {
		i := -1
		if cur != nil {
			i = cur.find(id)
		}
		if i < 0 {
			return nil, ErrNotFound
		}
		next := cur.clone()
		if err := fn(next, i); err != nil {
			return nil, err
		}
		return next, nil
	})
	return err
}

// client builds a minio client whose every connection goes through the egress guard.
func (l *Library) client(d *Destination) (*minio.Client, error) {
	secret, err := l.Sealer.Open(d.ID, d.SealedSecret)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		DialContext:           l.Guard.DialContext,
		Proxy:                 nil, // a proxy would dial the customer's host itself, past the guard
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       30 * time.Second,
	}
	var rt http.RoundTripper = boundedAnswers{base: tr}
	lookup := minio.BucketLookupDNS
	if d.PathStyle {
		lookup = minio.BucketLookupPath
	}
	return minio.New(d.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(d.AccessKey, secret, ""),
		Secure:       d.Secure,
		Region:       d.Region,
		BucketLookup: lookup,
		Transport:    rt,
		MaxRetries:   1, // the outbox retries on its schedule
	})
}

// ObjectKey is prefix + "/" + k (k alone without a prefix).
func (d *Destination) ObjectKey(k string) string {
	if d.Prefix == "" {
		return k
	}
	return d.Prefix + "/" + k
}

// StepError says which step of a bucket operation failed and why, in words a customer can act on.
type StepError struct {
	Step   string // "connect", "write", "read", "delete"
	Code   string // a Code* value: the delivery's error_code (docs/storage.md)
	Reason string
	Err    error
}

// Delivery error codes (a failed delivery's error_code and its storage.delivery.failed event's).
const (
	CodeKeyConflict        = "object_key_conflict"           // an object exists under the key; never overwritten
	CodeUnreachable        = "storage_unreachable"           // the endpoint could not be reached
	CodeTargetRefused      = "storage_target_refused"        // the endpoint's address is refused (egress rules)
	CodeCredentials        = "storage_credentials_rejected"  // wrong access key or secret
	CodeAccessDenied       = "storage_access_denied"         // the credentials lack a permission
	CodeBucketNotFound     = "storage_bucket_not_found"      // the bucket does not exist
	CodeWriteFailed        = "storage_write_failed"          // any other refusal of the server
	CodeDestinationDeleted = "storage_destination_not_found" // the destination was deleted before delivery
	CodeResultUnavailable  = "result_unavailable"            // the staged output is gone (asset deleted or expired)
	// CodeResultHasDestination: a moved result already belongs to another delivery (one destination per result).
	CodeResultHasDestination = "storage_destination_conflict"
)

func (e *StepError) Error() string { return e.Step + ": " + e.Reason }
func (e *StepError) Unwrap() error { return e.Err }

// ErrExists is wrapped when a conditional create found an object under the key: it is never overwritten.
var ErrExists = errors.New("an object already exists under this key")

// classify names the failed step and its cause. The reason may quote what the server chose (its error
// message and code, a TLS certificate's names in a connection error): it is escaped and bounded
// (hiddenchar.Remote), as the destination's last_error, a delivery's and the API's 422 detail all show it.
func classify(step string, err error) *StepError {
	se := classifyRaw(step, err)
	se.Reason = hiddenchar.Remote(se.Reason, hiddenchar.RemoteLimit)
	return se
}

func classifyRaw(step string, err error) *StepError {
	if errors.Is(err, egress.ErrRefused) {
		return &StepError{Step: "connect", Code: CodeTargetRefused, Reason: err.Error(), Err: err}
	}
	resp := minio.ToErrorResponse(err)
	perm := map[string]string{"write": "s3:PutObject", "read": "s3:GetObject", "delete": "s3:DeleteObject"}[step]
	switch {
	case resp.StatusCode == 412 || resp.Code == "PreconditionFailed":
		return &StepError{Step: step, Code: CodeKeyConflict, Reason: ErrExists.Error() + " (conditional create refused; it is never overwritten)", Err: ErrExists}
	case resp.Code == "InvalidAccessKeyId" || resp.Code == "SignatureDoesNotMatch":
		return &StepError{Step: step, Code: CodeCredentials, Reason: "the bucket refused the credentials (" + resp.Code + "): check access_key_id and secret_access_key", Err: err}
	case resp.Code == "NoSuchBucket":
		return &StepError{Step: step, Code: CodeBucketNotFound, Reason: "the bucket does not exist (NoSuchBucket)", Err: err}
	case resp.StatusCode == 403 || resp.Code == "AccessDenied":
		return &StepError{Step: step, Code: CodeAccessDenied, Reason: "access denied: the credentials lack " + perm + " on this bucket and prefix", Err: err}
	case resp.StatusCode == 0:
		return &StepError{Step: "connect", Code: CodeUnreachable, Reason: "the endpoint could not be reached: " + err.Error(), Err: err}
	default:
		return &StepError{Step: step, Code: CodeWriteFailed, Reason: fmt.Sprintf("%s failed: HTTP %d %s %s", step, resp.StatusCode, resp.Code, resp.Message), Err: err}
	}
}

// Put writes body under the destination's prefix + k with a conditional create (If-None-Match: *) and
// returns the object's ETag as the server answered the write. owner (the request id) is stored as the
// object's user metadata: when the create is refused because the object exists, an object that carries the
// same owner is this delivery's own earlier write (a node died before recording it), and Put returns its
// ETag instead of failing; any other existing object is left alone and the error wraps ErrExists.
func (l *Library) Put(ctx context.Context, d *Destination, k, owner string, body io.Reader, size int64, contentType string) (string, error) {
	c, err := l.client(d)
	if err != nil {
		return "", &StepError{Step: "connect", Code: CodeUnreachable, Reason: hiddenchar.Remote(err.Error(), hiddenchar.RemoteLimit), Err: err}
	}
	opts := minio.PutObjectOptions{ContentType: contentType, DisableMultipart: size >= 0 && size <= 5<<30,
		UserMetadata: map[string]string{ownerMeta: owner}}
	opts.SetMatchETagExcept("*")
	info, err := c.PutObject(ctx, d.Bucket, d.ObjectKey(k), body, size, opts)
	if err == nil {
		return info.ETag, nil
	}
	se := classify("write", err)
	torn := se.Code == CodeUnreachable && ctx.Err() == nil && cutOff(err)
	if !errors.Is(se, ErrExists) && !torn {
		return "", se
	}
	// Only read to recognise our own object or another's; its ETag is reported, never used as a write
	// condition (research 6.1). A write that ended without an answer (torn) is read too: a server may refuse
	// the conditional create as soon as it has the headers and close the connection while a large body is
	// still being sent, so the client sees a broken pipe or a reset instead of the 412; and a write whose
	// answer was lost may have landed.
	st, serr := c.StatObject(ctx, d.Bucket, d.ObjectKey(k), minio.StatObjectOptions{})
	switch {
	case serr == nil && st.UserMetadata[ownerMeta] == owner && st.Size == size:
		return st.ETag, nil
	case serr == nil && torn:
		return "", &StepError{Step: "write", Code: CodeKeyConflict,
			Reason: ErrExists.Error() + " (the conditional create was cut off; it is never overwritten)", Err: ErrExists}
	}
	return "", se
}

// cutOff tells a write that reached the server and lost its connection mid-request (its outcome unknown)
// from one that never connected: only the first is worth reading the key back for.
func cutOff(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF)
}

// ownerMeta is the user metadata naming the request whose output an object is.
const ownerMeta = "Filigrane-Request-Id"

// Verify writes a probe object with a conditional create, reads it back, deletes it, and records the outcome
// on the destination (verified_at on success, last_error naming the failed step otherwise).
func (l *Library) Verify(ctx context.Context, org, id string, now time.Time) (*Destination, *StepError, error) {
	d, err := l.Get(ctx, org, id)
	if err != nil {
		return nil, nil, err
	}
	se := l.probe(ctx, d, now)
	d, err = l.record(ctx, org, id, func(x *Destination) {
		if se == nil {
			t := now
			x.VerifiedAt, x.LastError = &t, ""
		} else {
			x.VerifiedAt, x.LastError = nil, hiddenchar.Remote(se.Error(), hiddenchar.RemoteLimit)
		}
	})
	return d, se, err
}

func (l *Library) probe(ctx context.Context, d *Destination, now time.Time) *StepError {
	c, err := l.client(d)
	if err != nil {
		return &StepError{Step: "connect", Code: CodeUnreachable, Reason: err.Error(), Err: err}
	}
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	k := d.ObjectKey(fmt.Sprintf(".filigrane-connection-%s-%s.txt", d.ID, hex.EncodeToString(nonce[:])))
	body := []byte("Filigrane connection probe of " + d.ID + " at " + now.UTC().Format(time.RFC3339) + "\n")
	opts := minio.PutObjectOptions{ContentType: "text/plain", DisableMultipart: true}
	opts.SetMatchETagExcept("*")
	if _, err := c.PutObject(ctx, d.Bucket, k, bytes.NewReader(body), int64(len(body)), opts); err != nil {
		return classify("write", err)
	}
	obj, err := c.GetObject(ctx, d.Bucket, k, minio.GetObjectOptions{})
	if err != nil {
		return classify("read", err)
	}
	got, err := io.ReadAll(io.LimitReader(obj, int64(len(body))+1))
	_ = obj.Close()
	if err != nil {
		return classify("read", err)
	}
	if !bytes.Equal(got, body) {
		return &StepError{Step: "read", Code: CodeWriteFailed, Reason: "the probe object read back differs from what was written"}
	}
	if err := c.RemoveObject(ctx, d.Bucket, k, minio.RemoveObjectOptions{}); err != nil {
		return classify("delete", err)
	}
	return nil
}

// MaxObjectKey bounds prefix + "/" + key, in bytes (S3 allows 1024; Etchv's SDKs check 800).
const MaxObjectKey = 800

// ValidKey checks a caller's storage_key: relative, no empty, "." or ".." segments, none of the characters
// internal/hiddenchar refuses in a name (control characters among them), and with the destination's prefix at
// most MaxObjectKey bytes.
func ValidKey(d *Destination, k string) error {
	if k == "" || strings.HasPrefix(k, "/") {
		return errors.New("must be a relative, non-empty key")
	}
	for _, seg := range strings.Split(k, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return errors.New("must not have empty, '.' or '..' segments")
		}
	}
	// Control characters, and those that show nothing or reorder the text around them: the key is shown in
	// receipts, deliveries and the console, where "a\u202egnp.exe" would pass for another name.
	if r, found := hiddenchar.InName(k); found {
		return fmt.Errorf("must not hold %s", hiddenchar.Describe(r))
	}
	if len(d.ObjectKey(k)) > MaxObjectKey {
		return fmt.Errorf("prefix and key together exceed %d bytes", MaxObjectKey)
	}
	return nil
}

// DefaultKey is the object key of a result whose request named none: <request id>/<output filename>, so
// that results never collide and a customer finds each by the request id of its receipt.
func DefaultKey(requestID, filename string) string {
	if filename == "" || strings.ContainsAny(filename, "/\\") || filename == "." || filename == ".." {
		filename = "output"
	}
	return requestID + "/" + filename
}

// ErrObjectGone: the object under a delivered key no longer exists.
var ErrObjectGone = errors.New("the object is no longer in the bucket")

// Object is an open object of a destination.
type Object struct {
	Body        io.ReadCloser
	Size        int64
	ETag        string
	ContentType string
}

// Open reads the object under objectKey (prefix included) of destination d: its body and what the bucket
// says of it. ErrObjectGone (wrapped) when there is none; a *StepError of the read step otherwise.
func (l *Library) Open(ctx context.Context, d *Destination, objectKey string) (*Object, error) {
	c, err := l.client(d)
	if err != nil {
		return nil, &StepError{Step: "connect", Code: CodeUnreachable, Reason: err.Error(), Err: err}
	}
	obj, err := c.GetObject(ctx, d.Bucket, objectKey, minio.GetObjectOptions{})
	if err == nil {
		var st minio.ObjectInfo
		if st, err = obj.Stat(); err == nil {
			return &Object{Body: obj, Size: st.Size, ETag: st.ETag, ContentType: st.ContentType}, nil
		}
		_ = obj.Close()
	}
	if minio.ToErrorResponse(err).Code == "NoSuchKey" {
		return nil, fmt.Errorf("%s: %w", objectKey, ErrObjectGone)
	}
	return nil, classify("read", err)
}

// maxAnswerBytes bounds the body of every answer of a customer's endpoint but an object's content: bucket
// location, errors, copy results and the like are well under a kilobyte.
const maxAnswerBytes = 1 << 20

// errAnswerTooLarge ends the reading of an answer past maxAnswerBytes.
var errAnswerTooLarge = errors.New("storage: the endpoint's answer is larger than 1 MiB")

// boundedAnswers caps the bodies of a customer endpoint's answers. The endpoint is whatever server the customer
// names: minio-go decodes some answers (the bucket location asked for when no region is set, among others)
// with an XML decoder reading to the end, so an endless answer grew the node's memory without bound (a verify
// against such a server took a node to 10.9 GB). An object's content (a GET without a query) is left alone: its
// readers bound it by the object's size.
type boundedAnswers struct{ base http.RoundTripper }

func (b boundedAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.base.RoundTrip(req)
	if err != nil || (req.Method == http.MethodGet && req.URL.RawQuery == "") {
		return resp, err
	}
	resp.Body = &cappedBody{rc: resp.Body, left: maxAnswerBytes}
	return resp, nil
}

// cappedBody reads at most left bytes, then fails with errAnswerTooLarge.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

func (c *cappedBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errAnswerTooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.rc.Read(p)
	c.left -= int64(n)
	return n, err
}

func (c *cappedBody) Close() error { return c.rc.Close() }
