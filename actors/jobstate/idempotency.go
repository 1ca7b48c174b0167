package jobstate

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"maps"
	"sort"
	"strings"
	"time"
)

// ValidIdempotencyKey reports whether key is 8 to 128 letters, digits, hyphens or underscores (spec 2.1);
// anything else is answered with 422.
func ValidIdempotencyKey(key string) bool {
	if len(key) < 8 || len(key) > 128 {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// FingerprintInput is everything about a request that makes it "the same request" for idempotency: the
// endpoint (operation and media), the file, the data, and every option (spec 7: a different accelerator is a
// conflict). The sync and async forms of an endpoint are the same request: they differ in how the answer is
// delivered, not in what is done, so a sync request that turned into a job can be replayed on /async.
// Where the file came from (direct upload or upload_id) is not part of it either; its digest is.
type FingerprintInput struct {
	Operation            Operation
	Media                Media
	FileSHA256           string // hex SHA-256 of the file
	DataDigest           string // hex SHA-256 of the canonical data object; empty for detection
	Accelerator          Accelerator
	WebhookID            string
	StorageDestinationID string
	StorageKey           string
	// OutputFormat is an image embed's output format; empty and png agree, and a PNG request fingerprints as
	// it did before the option existed (records of that time keep matching their replays).
	OutputFormat OutputFormat
	// Extra holds options added after this list was written, by name; an absent and an empty map agree, so
	// adding an option does not change the fingerprints of requests that do not use it.
	Extra map[string]string
}

// Fingerprint identifies a request for idempotency: the key it was sent with and a hash of its inputs.
type Fingerprint struct {
	Key  string `msgpack:"key"`
	Hash string `msgpack:"hash"` // hex SHA-256 over the canonical encoding of the FingerprintInput
}

// fingerprintDomain versions the encoding; a new encoding must use a new domain so that old records
// never match by accident.
const fingerprintDomain = "filigrane/job-fingerprint/v1"

// NewFingerprint validates key and fingerprints in. Values that mean the same are spelled the same first: an
// empty accelerator is the default cpu, and hex digests compare case-insensitively.
func NewFingerprint(key string, in FingerprintInput) (Fingerprint, error) {
	if !ValidIdempotencyKey(key) {
		return Fingerprint{}, fmt.Errorf("idempotency key %q: want 8 to 128 letters, digits, hyphens or underscores: %w",
			key, ErrInvalid)
	}
	accel := in.Accelerator
	if accel == "" {
		accel = AcceleratorCPU
	}
	h := sha256.New()
	// Every field is length-prefixed, so no two different inputs encode to the same bytes.
	for _, f := range []string{fingerprintDomain, string(in.Operation), string(in.Media),
		strings.ToLower(in.FileSHA256), strings.ToLower(in.DataDigest), string(accel), in.WebhookID,
		in.StorageDestinationID, in.StorageKey} {
		writeField(h, f)
	}
	extra := in.Extra
	if f := in.OutputFormat.stored(); f != "" {
		// Written as the extra option output_format: a new option that only changes the fingerprints of the
		// requests that use it.
		extra = maps.Clone(extra)
		if extra == nil {
			extra = map[string]string{}
		}
		extra["output_format"] = string(f)
	}
	names := make([]string, 0, len(extra))
	for name := range extra {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		writeField(h, name)
		writeField(h, extra[name])
	}
	return Fingerprint{Key: key, Hash: hex.EncodeToString(h.Sum(nil))}, nil
}

func writeField(h hash.Hash, s string) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
	h.Write([]byte(s))
}

// IsZero reports whether f is the fingerprint of a request without an Idempotency-Key.
func (f Fingerprint) IsZero() bool { return f == Fingerprint{} }

// Matches reports whether other is a replay of the request f came from: the same key and the same inputs.
func (f Fingerprint) Matches(other Fingerprint) bool { return !f.IsZero() && f == other }

// CheckReplay decides a request that arrived with the Idempotency-Key this job was created with: nil means it
// is the same request (answer with this job, charge nothing again); ErrIdempotencyConflict means the key was
// reused with different inputs or options (409).
func (r *Record) CheckReplay(fp Fingerprint) error {
	if r.Idempotency.Matches(fp) {
		return nil
	}
	if r.Idempotency.IsZero() {
		return fmt.Errorf("job %s was created without an idempotency key: %w", r.RequestID, ErrIdempotencyConflict)
	}
	if fp.Key != r.Idempotency.Key {
		return fmt.Errorf("job %s was created with another idempotency key: %w", r.RequestID, ErrIdempotencyConflict)
	}
	return fmt.Errorf("idempotency key %q of job %s: %w", fp.Key, r.RequestID, ErrIdempotencyConflict)
}

// IsRedelivery reports whether s is the request that created r delivered to the job actor again: a request
// without an Idempotency-Key has a random request id of its own, so a second submission under that id is the
// cluster retrying one message whose reply was lost (its host stopped or left between the commit and the
// reply), never another client request. It is answered like a replay, not as a reused key (409).
func (r *Record) IsRedelivery(s Spec) bool {
	accel := s.AcceleratorRequested
	if accel == "" {
		accel = AcceleratorCPU // as Accept stores it
	}
	return s.IdempotencyKey == "" && r.Idempotency.IsZero() && r.OrgID == s.OrgID && r.BatchID == s.BatchID &&
		r.Operation == s.Operation && r.Media == s.Media && r.Input.SHA256 == s.Input.SHA256 &&
		r.WatermarkID == s.WatermarkID && r.AcceleratorRequested == accel && r.OutputFormat == s.OutputFormat.stored()
}

// Replay is how a replay of the request that created a job is answered: the same request sent again with
// the same Idempotency-Key and inputs, on its sync or its async endpoint (spec 3.1, 7).
type Replay int

const (
	// ReplayPending: the job has no committed outcome yet. Async answers 202 with the receipt; sync waits
	// for the outcome like the first request did.
	ReplayPending Replay = iota
	// ReplaySucceeded: the result is available. Sync answers the result; async the 202 receipt, whose status
	// says succeeded and whose result_url serves it.
	ReplaySucceeded
	// ReplayFailed: the job failed for good. Sync and async both answer the failure's status and problem
	// body, so a client learns the same outcome whichever endpoint it retries on.
	ReplayFailed
	// ReplayGone: the job succeeded but its result is no longer available (expired after ResultRetention,
	// or the watermarked asset was deleted): 410, sync or async. A 202 "succeeded" would send the client
	// to a result URL that answers 410.
	ReplayGone
)

// ReplayAt decides a replay at now. outputDeleted reports that the output of a succeeded job is gone (the
// watermarked asset was deleted); the caller looks that up, the record cannot know it.
func (r *Record) ReplayAt(now time.Time, outputDeleted bool) Replay {
	switch {
	case !r.Committed():
		// A terminal job whose charge or refund is not settled yet is shown as pending (DESIGN.md rule 3).
		return ReplayPending
	case r.Status == StatusFailed:
		return ReplayFailed
	case outputDeleted || !r.ResultAvailable(now):
		return ReplayGone
	}
	return ReplaySucceeded
}

// OptionsConflict reports, before the request's file is read, whether a request for op on media with
// accelerator can possibly be a replay of the request that created r: a different operation, media or
// accelerator is a conflict whatever the file and data are (spec 7: "including a different
// accelerator"). The edge uses it to answer 409 ahead of refusals that depend on those options (a GPU that
// is not available), so the answer to a reused key does not depend on the state of the deployment.
func (r *Record) OptionsConflict(op Operation, media Media, accelerator Accelerator) error {
	if accelerator == "" {
		accelerator = AcceleratorCPU
	}
	if r.Operation != op || r.Media != media || r.AcceleratorRequested != accelerator {
		return fmt.Errorf("job %s is a %s %s on %s, the request a %s %s on %s: %w", r.RequestID, r.Media,
			r.Operation, r.AcceleratorRequested, media, op, accelerator, ErrIdempotencyConflict)
	}
	return nil
}
