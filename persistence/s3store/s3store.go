// Package s3store implements persistence.Store on S3-compatible object storage: the record store of the cluster
// mode, where any node can take over any actor because state lives in the bucket, not on the node.
//
// Each key is one object; its version is the object's ETag. Compare-and-set is a conditional PUT: If-None-Match:*
// to create, If-Match:<etag> to replace. The server evaluates the condition and publishes the object atomically
// (verified on versitygw's posix backend and on MinIO; AWS S3 documents the same semantics).
//
// Reads are not snapshots. A GET (or HEAD) may return the body of one version with the ETag of another when a
// write lands during the read (measured on versitygw's posix backend: it reads the ETag attribute and the file
// separately). A create that HEADs a tombstone and then PUTs If-Match:<that ETag> can therefore win while
// another creator also wins. So the store never feeds an unverified read's ETag into a condition:
//
//   - Every ETag is the MD5 of the body (single-part PUTs; CheckConditionalWrites refuses a server that does
//     otherwise), and every read checks MD5(body) == ETag and reads again, after a short pause, on a mismatch.
//     A version handed to a caller is always the ETag of the body it came with.
//
//   - Unique values. Writing the same bytes twice would give the same version, and a writer holding a version
//     from before would still win (ABA). Every value body therefore starts with a 16-byte header holding a
//     random nonce: every value write gets a fresh ETag, never equal to another version or to a tombstone's.
//
//   - Deletes are tombstones with one constant body. Plain DELETE cannot be made conditional through minio-go,
//     and versitygw's conditional DELETE checks the ETag and then removes the file outside the lock that
//     conditional PUTs take, so a create landing in between would be lost. Delete is therefore a conditional
//     PUT (If-Match:<value's version>) of the tombstone, atomic like any other write. All tombstones have the
//     same 15-byte body, so their ETag (TombstoneETag) is known without reading: a create is If-None-Match:*,
//     and when an object exists, If-Match:<TombstoneETag>, which the server grants only while the key is
//     deleted. Get, Scan and Delete treat a tombstone as a missing key; scans skip tombstones by their size
//     without reading them. Tombstones are never removed: a deleted key costs one tiny object for good. (A
//     tombstone with a random body, as written by earlier versions of the store, is replaced with If-Match on
//     its verified ETag.)
//
//   - Order-preserving object names. Keys are arbitrary bytes; the object name is the key in lowercase hex
//     (which sorts like the bytes), followed by "-" (which sorts below every hex digit, so a key sorts before
//     its extensions), with a "/" after every 200 characters (file-backed servers such as versitygw's posix
//     backend turn name segments into file names, limited to 255 bytes). Because no directory name is a prefix
//     of a sibling entry, a server that lists by walking sorted directories returns the same order as S3's
//     byte order. Keys are limited to MaxKeyLen bytes so that names stay within S3's 1024.
//
//   - Torn objects. versitygw with --sidecar metadata stores a PUT's new ETag before it publishes the body, so
//     a crash in between leaves the old body with an ETag that belongs to no body, or an ETag and no object;
//     the server then compares every condition with that ETag. A read whose mismatch outlasts the server's
//     publish lock writes the body's state back with If-Match on the held ETag (settle); a create that meets
//     an ETag without an object repairs it only with the ETag of its own unanswered PUT, and otherwise fails
//     with ErrTornObject. OnTorn reports both.
//
// Scans list names in order and then GET each value (concurrently, a few at a time); a scan is not a snapshot:
// an item reflects the key's state when its value was read, and keys deleted meanwhile are left out.
package s3store

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"

	"filigrane/persistence"
)

const (
	// MaxKeyLen is the longest key the store accepts: hex doubles it, and the object name must fit in 1024
	// bytes together with the prefix, separators and terminator.
	MaxKeyLen = 400

	// MaxPrefixLen bounds the object-name prefix given to New, for the same reason.
	MaxPrefixLen = 100

	segmentLen = 200
	terminator = "-"

	magic          = 0xf1
	kindValue      = 1
	kindTombstone  = 2
	valueHeaderLen = 16
	tombstoneLen   = 15

	// fetchers bounds concurrent GETs during a scan.
	fetchers = 8

	// createRounds bounds the rounds of a create that keeps meeting concurrent changes (about 0.5 s in all).
	createRounds = 12

	// settleRounds bounds the repair rounds of one read (see settle): each follows a change of the object
	// between the mismatching reads and the repair.
	settleRounds = 3

	// ghostRounds is how many times a create meets an ETag without a body, each after waiting out the publish
	// lock, before it takes the object for torn (ErrTornObject).
	ghostRounds = 3

	// maxUnanswered bounds the object names whose unanswered PUTs the store remembers (remember).
	maxUnanswered = 4096

	// readAttempts bounds how often a read is repeated when its body and ETag come from different versions
	// (about 0.7 s of waiting in all). Each mismatch means a write landed during the read; many in a row mean
	// a key rewritten without pause, or a server whose ETags are not MD5 digests.
	readAttempts = 20

	// internalMarker starts the names of the store's own objects under the prefix (the conditional-write
	// probe). Key names hold only hex digits, "/" and "-", so they never collide, and scans skip these.
	internalMarker = "~"
)

// Store is a persistence.Store on one bucket (under an optional object-name prefix). It is safe for concurrent
// use, also from several processes: the server arbitrates every write.
type Store struct {
	client *minio.Client
	bucket string
	prefix string
	closed atomic.Bool

	onTorn func(Torn)
	mateMu sync.Mutex
	mates  map[byte]string // barrier object by lock shard

	unknownMu sync.Mutex
	unknown   map[string][]string // object name -> ETags of PUTs to it whose outcome is unknown (remember)
}

var _ persistence.Store = (*Store)(nil)

// New returns a Store keeping its objects in bucket under prefix ("" or ending with "/", for example
// "records/"). The bucket must exist, and nothing else may write under prefix: with prefix "" the store owns the
// whole bucket, so a blob store sharing the bucket needs prefixes on both. New does no I/O; the client is the
// caller's and Close does not touch it.
func New(client *minio.Client, bucket, prefix string) (*Store, error) {
	if client == nil || bucket == "" {
		return nil, errors.New("s3store: new: client and bucket are required")
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		return nil, fmt.Errorf("s3store: new: prefix %q must end with /", prefix)
	}
	if len(prefix) > MaxPrefixLen {
		return nil, fmt.Errorf("s3store: new: prefix longer than %d bytes", MaxPrefixLen)
	}
	return &Store{client: client, bucket: bucket, prefix: prefix}, nil
}

// segmented inserts "/" after every segmentLen characters, except at the end.
func segmented(s string) string {
	if len(s) <= segmentLen {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/segmentLen)
	for len(s) > segmentLen {
		b.WriteString(s[:segmentLen])
		b.WriteByte('/')
		s = s[segmentLen:]
	}
	b.WriteString(s)
	return b.String()
}

func (s *Store) objectName(key []byte) string {
	return s.prefix + segmented(hex.EncodeToString(key)+terminator)
}

// namePrefix is the object-name prefix shared by all keys starting with prefix. It is also the StartAfter value
// that lists every key >= prefix: a key's own name extends it with more digits or the terminator.
func (s *Store) namePrefix(prefix []byte) string {
	return s.prefix + segmented(hex.EncodeToString(prefix))
}

func (s *Store) keyOf(name string) ([]byte, error) {
	rest, ok := strings.CutPrefix(name, s.prefix)
	if ok {
		rest, ok = strings.CutSuffix(rest, terminator)
	}
	var key []byte
	if ok {
		var err error
		key, err = hex.DecodeString(strings.ReplaceAll(rest, "/", ""))
		ok = err == nil && len(key) > 0 && s.objectName(key) == name
	}
	if !ok {
		return nil, fmt.Errorf("object %q under the store's prefix is not a store key (foreign object in the bucket?)", name)
	}
	return key, nil
}

func checkKey(key []byte) error {
	if len(key) == 0 {
		return fmt.Errorf("%w: empty store key", persistence.ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: store key of %d bytes, limit %d", persistence.ErrInvalidKey, len(key), MaxKeyLen)
	}
	return nil
}

// tombstoneBody is the body of every tombstone this store writes. Its being constant is the point: its ETag is
// known without reading (see the package comment).
var tombstoneBody = []byte{magic, kindTombstone, 'f', 'i', 'l', 'i', 'g', 'r', 'a', 'n', 'e', '-', 'd', 'e', 'l'}

// TombstoneETag is the ETag of tombstoneBody: the MD5 of the body, as S3 gives for single-part PUTs.
var TombstoneETag = md5Hex(tombstoneBody)

func md5Hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// sameETag compares ETags as servers spell them: quotes (minio-go strips them) and case do not matter.
func sameETag(a, b string) bool {
	return strings.EqualFold(strings.Trim(a, `"`), strings.Trim(b, `"`))
}

// valueBody returns a value's object body: the header with a fresh random nonce, then the value.
func valueBody(value []byte) ([]byte, error) {
	b := make([]byte, valueHeaderLen, valueHeaderLen+len(value))
	b[0], b[1] = magic, kindValue
	if _, err := rand.Read(b[2:]); err != nil {
		return nil, err
	}
	return append(b, value...), nil
}

// parse returns the value in an object body, or tombstone = true.
func parse(b []byte) (value []byte, tombstone bool, err error) {
	switch {
	case len(b) == tombstoneLen && b[0] == magic && b[1] == kindTombstone:
		return nil, true, nil
	case len(b) >= valueHeaderLen && b[0] == magic && b[1] == kindValue:
		return b[valueHeaderLen:], false, nil
	}
	return nil, false, fmt.Errorf("object body of %d bytes is not a store record", len(b))
}

func (s *Store) enter(ctx context.Context) error {
	if s.closed.Load() {
		return errors.New("store is closed")
	}
	return ctx.Err()
}

func errCode(err error) (string, int) {
	r := minio.ToErrorResponse(err)
	return r.Code, r.StatusCode
}

func isPreconditionFailed(err error) bool {
	code, status := errCode(err)
	return code == "PreconditionFailed" || status == http.StatusPreconditionFailed
}

func isNotFound(err error) bool {
	code, status := errCode(err)
	return code == "NoSuchKey" || status == http.StatusNotFound
}

// ctxErr prefers the context's error: when the context ends mid-request, the client's error says less.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// errETagNotMD5 is a read whose body and ETag never matched, not even after a repair was tried: a key rewritten
// nonstop, or a server whose ETags are not MD5 digests (which CheckConditionalWrites refuses at startup).
var errETagNotMD5 = errors.New("the object's ETag does not match the MD5 of its body")

// read GETs one object and returns its body and ETag, where the ETag is verified to be the MD5 of the body.
// One response may carry the body of one version and the ETag of another (see the package comment); such a
// read is repeated. A mismatch that outlasts the repeats may be a torn object, which settle repairs.
func (s *Store) read(ctx context.Context, name string) ([]byte, string, error) {
	var etag, sum string
	for round := range settleRounds {
		var b []byte
		var ok bool
		var err error
		b, etag, ok, err = s.readVerified(ctx, name)
		if err != nil || ok {
			return b, etag, err
		}
		sum = md5Hex(b)
		if round == settleRounds-1 {
			break
		}
		b, etag, ok, err = s.settle(ctx, name, etag)
		if err != nil || ok {
			return b, etag, err
		}
		// The object changed meanwhile: it was not torn, or another store repaired it; read it afresh.
	}
	return nil, "", fmt.Errorf("read %s, last with ETag %s and body MD5 %s: %w", name, etag, sum, errETagNotMD5)
}

// readVerified reads name up to readAttempts times until its body and ETag agree (ok: etag is the body's MD5);
// otherwise it returns the last body with its disagreeing ETag.
func (s *Store) readVerified(ctx context.Context, name string) (b []byte, etag string, ok bool, err error) {
	for attempt := range readAttempts {
		if attempt > 1 {
			// A write is being published right now; give it a moment rather than spinning.
			if err := sleepCtx(ctx, min(time.Millisecond<<(attempt-2), 50*time.Millisecond)); err != nil {
				return nil, "", false, err
			}
		}
		b, etag, err = s.readOnce(ctx, name)
		if err != nil {
			return nil, "", false, err
		}
		if sum := md5Hex(b); sameETag(etag, sum) {
			return b, sum, true, nil
		}
	}
	return b, etag, false, nil
}

// settle handles an object whose body and ETag kept disagreeing: etag is the ETag the server kept giving.
//
// That is either a write being published right now (slowly), or a torn object: versitygw in sidecar mode
// stores a PUT's new ETag in its metadata directory and only then renames the new body into place, so a kill
// -9 in between leaves the old body with the ETag of a body that was never published, for good. The server
// evaluates If-Match against that ETag, so no caller holding the body's real version can ever write the key
// again, and no read ever verifies: without repair, every operation on the key fails forever.
//
// The two cases are told apart by waiting out the server's publish lock (barrier): a PUT that stored the ETag
// publishes its body before it releases the lock. If the same mismatch is still there afterwards, the write
// that stored etag is dead, and its caller never got an answer, so it never took its write for done: the body
// on disk is the key's last written state. settle then writes that state back (a value with a fresh nonce, or
// the constant tombstone) with If-Match on the ETag the server holds. The server arbitrates that write like
// any other: among several stores repairing the same key one wins and the others read again, and a caller
// holding the body's old version gets ErrVersionMismatch and re-reads, as after any concurrent write.
//
// ok reports a verified body and ETag (b, etag); !ok with no error means the object changed meanwhile.
func (s *Store) settle(ctx context.Context, name, stale string) (b []byte, etag string, ok bool, err error) {
	if err := s.barrier(ctx, name); err != nil {
		return nil, "", false, fmt.Errorf("wait for writes in progress on %s: %w", name, err)
	}
	b, etag, err = s.readOnce(ctx, name)
	if err != nil {
		return nil, "", false, err
	}
	if sum := md5Hex(b); sameETag(etag, sum) {
		return b, sum, true, nil
	}
	if !sameETag(etag, stale) {
		return nil, "", false, nil
	}
	value, tomb, err := parse(b)
	if err != nil {
		return nil, "", false, err
	}
	repaired := tombstoneBody
	if !tomb {
		if repaired, err = valueBody(value); err != nil {
			return nil, "", false, err
		}
	}
	etag, err = s.put(ctx, name, repaired, stale)
	if isPreconditionFailed(err) || isNotFound(err) {
		return nil, "", false, nil // another store repaired it, or wrote it with the stale ETag's holder gone
	}
	if err != nil {
		return nil, "", false, fmt.Errorf("repair torn object %s (ETag %s kept without its body): %w", name, stale, err)
	}
	s.reportTorn(Torn{Object: name, StaleETag: strings.Trim(stale, `"`), Tombstone: tomb, Repaired: true})
	return repaired, etag, true, nil
}

// Torn describes one torn object the store met (see settle and ErrTornObject), for the owner's logs and
// metrics.
type Torn struct {
	// Object is the object's name in the bucket.
	Object string
	// StaleETag is the ETag the server had kept without its body ("" when unknown).
	StaleETag string
	// Tombstone is set when the key was deleted (the repair wrote the tombstone back).
	Tombstone bool
	// Repaired is set when the store repaired the object; otherwise a create failed with ErrTornObject.
	Repaired bool
}

// OnTorn sets a function called for each torn object the store repaired or had to refuse (nil: none). Either
// is rare and worth a warning: the object storage lost a write it had half done (docs/operations.md, "Object
// storage"). Set it before the store is used.
func (s *Store) OnTorn(f func(Torn)) { s.onTorn = f }

func (s *Store) reportTorn(t Torn) {
	if s.onTorn != nil {
		s.onTorn(t)
	}
}

// barrier returns once every PUT that was publishing name when it was called has published. versitygw's posix
// backend holds a publish lock from a PUT's condition check to the rename of its body, one lock per shard of
// object names (the first byte of the name's SHA-256, across gateway processes too); an unconditional PUT of
// another object of the same shard takes that lock, so its answer comes after every such publish. On servers
// that publish atomically (no torn objects) the barrier is a harmless empty PUT. The barrier objects live
// under the store's internal marker, one per shard at most, and scans skip them.
func (s *Store) barrier(ctx context.Context, name string) error {
	_, err := s.client.PutObject(ctx, s.bucket, s.lockMate(name), bytes.NewReader(nil), 0,
		minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true})
	return ctxErr(ctx, err)
}

// lockMate returns the barrier object of name's lock shard: the first internal name, in a fixed sequence, whose
// SHA-256 starts with the same byte as name's. Every store computes the same names.
func (s *Store) lockMate(name string) string {
	shard := sha256.Sum256([]byte(name))
	s.mateMu.Lock()
	defer s.mateMu.Unlock()
	if s.mates == nil {
		s.mates = make(map[byte]string)
	}
	if m, ok := s.mates[shard[0]]; ok {
		return m
	}
	for i := 0; ; i++ {
		m := s.prefix + internalMarker + "publish-" + strconv.Itoa(i)
		if sum := sha256.Sum256([]byte(m)); sum[0] == shard[0] {
			s.mates[shard[0]] = m
			return m
		}
	}
}

func (s *Store) readOnce(ctx context.Context, name string) ([]byte, string, error) {
	obj, err := s.client.GetObject(ctx, s.bucket, name, minio.GetObjectOptions{})
	if err != nil {
		return nil, "", err
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		return nil, "", err
	}
	info, err := obj.Stat()
	if err != nil {
		return nil, "", err
	}
	return b, info.ETag, nil
}

// Get implements persistence.Store.
func (s *Store) Get(ctx context.Context, key []byte) (persistence.Item, error) {
	if err := s.enter(ctx); err != nil {
		return persistence.Item{}, fmt.Errorf("s3store: get %q: %w", key, err)
	}
	if checkKey(key) != nil {
		// Such a key cannot have been written.
		return persistence.Item{}, fmt.Errorf("s3store: get %q: %w", key, persistence.ErrNotFound)
	}
	b, etag, err := s.read(ctx, s.objectName(key))
	if isNotFound(err) {
		return persistence.Item{}, fmt.Errorf("s3store: get %q: %w", key, persistence.ErrNotFound)
	}
	if err != nil {
		return persistence.Item{}, fmt.Errorf("s3store: get %q: %w", key, ctxErr(ctx, err))
	}
	value, tomb, err := parse(b)
	if err != nil {
		return persistence.Item{}, fmt.Errorf("s3store: get %q: %w", key, err)
	}
	if tomb {
		return persistence.Item{}, fmt.Errorf("s3store: get %q: %w", key, persistence.ErrNotFound)
	}
	return persistence.Item{Key: bytes.Clone(key), Value: value, Version: persistence.Version(etag)}, nil
}

// put writes body to name under one condition: ifMatch == "" means If-None-Match:*, otherwise If-Match. It
// returns the new ETag, which must be the MD5 of data: versions are verified against bodies on every read.
func (s *Store) put(ctx context.Context, name string, data []byte, ifMatch string) (string, error) {
	opts := minio.PutObjectOptions{
		ContentType: "application/octet-stream",
		// One PUT: the condition must apply to a single atomic publish, and records are small.
		DisableMultipart: true,
	}
	if ifMatch == "" {
		opts.SetMatchETagExcept("*")
	} else {
		opts.SetMatchETag(ifMatch)
	}
	info, err := s.client.PutObject(ctx, s.bucket, name, bytes.NewReader(data), int64(len(data)), opts)
	want := md5Hex(data)
	if err != nil {
		if _, status := errCode(err); status == 0 || status >= 500 {
			s.remember(name, want)
		}
		return "", err
	}
	s.settled(name)
	if !sameETag(info.ETag, want) {
		return "", fmt.Errorf("the server answered a single-part PUT with ETag %q, not the MD5 of the body (%s): "+
			"this store needs MD5 ETags (no SSE-KMS, no checksum-based ETags)", info.ETag, want)
	}
	return want, nil
}

// state reads name (verified, see read): exists is false for a missing object; tombstone tells a deleted key;
// etag is the ETag of the body that was read.
func (s *Store) state(ctx context.Context, name string) (exists, tombstone bool, etag string, err error) {
	b, etag, err := s.read(ctx, name)
	if isNotFound(err) {
		return false, false, "", nil
	}
	if err != nil {
		return false, false, "", err
	}
	_, tomb, err := parse(b)
	if err != nil {
		return false, false, "", err
	}
	return true, tomb, etag, nil
}

// CompareAndSet implements persistence.Store.
func (s *Store) CompareAndSet(ctx context.Context, key []byte, expect persistence.Version, value []byte) (persistence.Version, error) {
	if err := checkKey(key); err != nil {
		return "", fmt.Errorf("s3store: compare-and-set %q: %w", key, err)
	}
	if err := s.enter(ctx); err != nil {
		return "", fmt.Errorf("s3store: compare-and-set %q: %w", key, err)
	}
	data, err := valueBody(value)
	if err != nil {
		return "", fmt.Errorf("s3store: compare-and-set %q: %w", key, err)
	}
	name := s.objectName(key)
	if sameETag(string(expect), TombstoneETag) {
		// Never a version of a value: Get does not hand it out, and If-Match on it would create the key.
		return "", fmt.Errorf("s3store: compare-and-set %q: expected version %q: %w", key, expect, persistence.ErrVersionMismatch)
	}
	if expect != persistence.NoVersion {
		etag, err := s.put(ctx, name, data, string(expect))
		if isPreconditionFailed(err) || isNotFound(err) {
			return "", fmt.Errorf("s3store: compare-and-set %q: expected version %q: %w", key, expect, persistence.ErrVersionMismatch)
		}
		if err != nil {
			return "", fmt.Errorf("s3store: compare-and-set %q: %w", key, ctxErr(ctx, err))
		}
		return persistence.Version(etag), nil
	}
	etag, err := s.create(ctx, name, data)
	if err != nil {
		return "", fmt.Errorf("s3store: compare-and-set %q: %w", key, err)
	}
	return persistence.Version(etag), nil
}

// create writes data to name if the key does not exist: no object, or a tombstone. No condition here rests on
// an unverified read: If-None-Match:* and If-Match:<TombstoneETag> are decided by the server alone.
func (s *Store) create(ctx context.Context, name string, data []byte) (string, error) {
	// Each round follows a concurrent change between two of our requests: the key was deleted, or the object
	// was not readable yet (versitygw's sidecar mode answers 412 to If-None-Match:* and then 404 to a GET for
	// a moment while another PUT publishes). Later rounds wait a little longer each.
	ghosts := 0
	for round := range createRounds {
		if round > 0 {
			if err := sleepCtx(ctx, min(time.Millisecond<<(round-1), 100*time.Millisecond)); err != nil {
				return "", err
			}
		}
		etag, err := s.put(ctx, name, data, "")
		if err == nil {
			return etag, nil
		}
		if !isPreconditionFailed(err) {
			return "", ctxErr(ctx, err)
		}
		// The S3 client sends a PUT again by itself after no answer or a server error (minio-go repeats a
		// seekable body up to MaxRetry times), so this 412 may answer the repeat of a first try that the
		// server tore: the ETag without a body that it holds would then be this write's own, and put saw only
		// the repeat's answer. Count it as unanswered (createOverGhost); forgotten below when the key turns out
		// to hold an object.
		s.remember(name, md5Hex(data))
		// An object exists. Replace it if it is a tombstone: the server grants this only while it is one, so
		// of several creators exactly one wins.
		etag, err = s.put(ctx, name, data, TombstoneETag)
		if err == nil {
			return etag, nil
		}
		if !isPreconditionFailed(err) && !isNotFound(err) {
			return "", ctxErr(ctx, err)
		}
		// Not a (constant) tombstone when the condition was evaluated: look at what is there now.
		exists, tomb, etag, err := s.state(ctx, name)
		if err != nil {
			return "", ctxErr(ctx, err)
		}
		switch {
		case !exists:
			// An ETag without a body: a PUT publishing right now, or one torn by a crash (see settle). Wait
			// out the publish lock; a ghost that outlasts several waits is torn.
			if ghosts++; ghosts == ghostRounds {
				return s.createOverGhost(ctx, name, data)
			}
			if err := s.barrier(ctx, name); err != nil {
				return "", fmt.Errorf("wait for writes in progress on %s: %w", name, err)
			}
			continue
		case sameETag(etag, TombstoneETag):
			continue // deleted since: try again
		case !tomb:
			// The key holds an object: no create of it is torn, and nothing remembered for it is needed.
			s.settled(name)
			return "", fmt.Errorf("key exists: %w", persistence.ErrVersionMismatch)
		}
		// A tombstone with a body of its own (written by an earlier version of the store). Its ETag was
		// verified against its body, which is unique, so If-Match names exactly that tombstone.
		etag, err = s.put(ctx, name, data, etag)
		if err == nil {
			return etag, nil
		}
		if !isPreconditionFailed(err) && !isNotFound(err) {
			return "", ctxErr(ctx, err)
		}
	}
	return "", errors.New("key keeps changing under a create; is something else deleting objects in the bucket?")
}

// ErrTornObject is a key the object storage holds an ETag for but no body: a create that a crash of the server
// cut off after it stored the new ETag and before it published the body (versitygw with --sidecar metadata).
// The key reads as missing, yet the server refuses every create (it compares If-None-Match and If-Match with
// that ETag), and only the write that was cut off knows the ETag. The store repairs it when this process made
// that write; otherwise creates of the key fail with this error until an operator removes the stale
// metadata (docs/operations.md, "Object storage").
var ErrTornObject = errors.New("the object storage keeps an ETag for this key without a body (a write torn by a crash of the storage server)")

// createOverGhost creates name over an ETag that the server keeps without a body: with If-Match on the ETag of
// one of this store's own writes to name whose outcome it never learnt, the only ETags a torn create can have
// left that anyone knows. If-Match on such an ETag succeeds only while the server still holds exactly it.
func (s *Store) createOverGhost(ctx context.Context, name string, data []byte) (string, error) {
	for _, stale := range s.unanswered(name) {
		etag, err := s.put(ctx, name, data, stale)
		if err == nil {
			s.reportTorn(Torn{Object: name, StaleETag: stale, Repaired: true})
			return etag, nil
		}
		if !isPreconditionFailed(err) && !isNotFound(err) {
			return "", ctxErr(ctx, err)
		}
	}
	s.reportTorn(Torn{Object: name})
	return "", fmt.Errorf("object %s: %w; creates of this key fail until the stale metadata is removed (docs/operations.md)", name, ErrTornObject)
}

// remember notes the ETag of a PUT to name whose outcome is unknown (no answer, or a server error, or a
// create's 412 that may answer the client library's own repeat of such a PUT): if a crash tore it, it is the
// ETag the server kept (see createOverGhost).
func (s *Store) remember(name, etag string) {
	s.unknownMu.Lock()
	defer s.unknownMu.Unlock()
	if s.unknown == nil {
		s.unknown = make(map[string][]string)
	}
	if _, ok := s.unknown[name]; !ok && len(s.unknown) >= maxUnanswered {
		for k := range s.unknown { // forget one: torn creates are rare, and this is only a chance to repair
			delete(s.unknown, k)
			break
		}
	}
	if slices.Contains(s.unknown[name], etag) {
		return
	}
	l := append(s.unknown[name], etag)
	if len(l) > 4 {
		l = l[len(l)-4:]
	}
	s.unknown[name] = l
}

// settled forgets the unanswered PUTs to name once a PUT to it succeeded: the server holds another ETag now.
func (s *Store) settled(name string) {
	s.unknownMu.Lock()
	defer s.unknownMu.Unlock()
	delete(s.unknown, name)
}

func (s *Store) unanswered(name string) []string {
	s.unknownMu.Lock()
	defer s.unknownMu.Unlock()
	return slices.Clone(s.unknown[name])
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Delete implements persistence.Store by writing a tombstone (see the package comment).
func (s *Store) Delete(ctx context.Context, key []byte, expect persistence.Version) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("s3store: delete %q: %w", key, err)
	}
	if err := s.enter(ctx); err != nil {
		return fmt.Errorf("s3store: delete %q: %w", key, err)
	}
	name := s.objectName(key)
	if expect == persistence.NoVersion {
		exists, tomb, _, err := s.state(ctx, name)
		if err != nil {
			return fmt.Errorf("s3store: delete %q: %w", key, ctxErr(ctx, err))
		}
		if exists && !tomb {
			return fmt.Errorf("s3store: delete %q: key exists: %w", key, persistence.ErrVersionMismatch)
		}
		return nil
	}
	if sameETag(string(expect), TombstoneETag) {
		return fmt.Errorf("s3store: delete %q: expected version %q: %w", key, expect, persistence.ErrVersionMismatch)
	}
	_, err := s.put(ctx, name, tombstoneBody, string(expect))
	if isPreconditionFailed(err) || isNotFound(err) {
		return fmt.Errorf("s3store: delete %q: expected version %q: %w", key, expect, persistence.ErrVersionMismatch)
	}
	if err != nil {
		return fmt.Errorf("s3store: delete %q: %w", key, ctxErr(ctx, err))
	}
	return nil
}

// Scan implements persistence.Store.
func (s *Store) Scan(ctx context.Context, prefix, start []byte, limit int) ([]persistence.Item, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("s3store: scan %q: limit %d must be positive", prefix, limit)
	}
	if err := s.enter(ctx); err != nil {
		return nil, fmt.Errorf("s3store: scan %q: %w", prefix, err)
	}
	lower := prefix
	if bytes.Compare(start, prefix) > 0 {
		if !bytes.HasPrefix(start, prefix) {
			return nil, nil // start lies past every key with this prefix
		}
		lower = start
	}
	opts := minio.ListObjectsOptions{
		Prefix:     s.namePrefix(prefix),
		StartAfter: s.namePrefix(lower),
		Recursive:  true,
		MaxKeys:    min(1000, limit+limit/2+8), // room for a few tombstones without a second page
	}
	if opts.StartAfter == opts.Prefix {
		opts.StartAfter = "" // the same thing, and some servers dislike StartAfter equal to the prefix
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		items   []persistence.Item
		pending []pendingItem
	)
	flush := func() error {
		got, err := s.fetch(ctx, pending)
		pending = pending[:0]
		if err != nil {
			return err
		}
		items = append(items, got...)
		return nil
	}
	for obj := range s.client.ListObjectsIter(ctx, s.bucket, opts) {
		if obj.Err != nil {
			return nil, fmt.Errorf("s3store: scan %q: %w", prefix, ctxErr(ctx, obj.Err))
		}
		if strings.HasPrefix(obj.Key, s.prefix+internalMarker) {
			continue
		}
		key, err := s.keyOf(obj.Key)
		if err != nil {
			return nil, fmt.Errorf("s3store: scan %q: %w", prefix, err)
		}
		if obj.Size == tombstoneLen {
			continue
		}
		pending = append(pending, pendingItem{key: key, name: obj.Key})
		// Fetch in batches of what is still missing: most fetched items are kept, and a key deleted
		// between listing and fetching is made up for by listing further.
		if len(items)+len(pending) == limit {
			if err := flush(); err != nil {
				return nil, fmt.Errorf("s3store: scan %q: %w", prefix, err)
			}
			if len(items) == limit {
				break
			}
		}
	}
	// The listing stops silently when the context ends; do not mistake that for the end of the keys.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("s3store: scan %q: %w", prefix, err)
	}
	if len(pending) > 0 {
		if err := flush(); err != nil {
			return nil, fmt.Errorf("s3store: scan %q: %w", prefix, err)
		}
	}
	return items, nil
}

type pendingItem struct {
	key  []byte
	name string
}

// fetch GETs the values of batch concurrently and returns those still present, in batch order.
func (s *Store) fetch(ctx context.Context, batch []pendingItem) ([]persistence.Item, error) {
	type result struct {
		item  persistence.Item
		found bool
		err   error
	}
	results := make([]result, len(batch))
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(fetchers, len(batch)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(batch) {
					return
				}
				p := batch[i]
				b, etag, err := s.read(ctx, p.name)
				if isNotFound(err) {
					continue
				}
				if err != nil {
					results[i].err = fmt.Errorf("get %q: %w", p.key, ctxErr(ctx, err))
					continue
				}
				value, tomb, err := parse(b)
				if err != nil {
					results[i].err = fmt.Errorf("get %q: %w", p.key, err)
					continue
				}
				if !tomb {
					results[i] = result{item: persistence.Item{Key: p.key, Value: value, Version: persistence.Version(etag)}, found: true}
				}
			}
		}()
	}
	wg.Wait()
	var items []persistence.Item
	for _, r := range results {
		if r.err != nil {
			return nil, r.err
		}
		if r.found {
			items = append(items, r.item)
		}
	}
	return items, nil
}

// CheckConditionalWrites verifies that the server enforces conditional PUTs on this bucket and that its ETags
// are the MD5 of the body. Every guarantee of the store rests on both: a server without support may ignore
// If-None-Match and If-Match silently, and with other ETags (SSE-KMS, checksum-based ETags) neither reads can
// be verified nor tombstones matched. Call it once at startup. It writes, overwrites and removes one probe
// object under the prefix.
func (s *Store) CheckConditionalWrites(ctx context.Context) error {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return fmt.Errorf("s3store: check conditional writes: %w", err)
	}
	name := s.prefix + internalMarker + "probe-" + hex.EncodeToString(rnd[:])
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = s.client.RemoveObject(cctx, s.bucket, name, minio.RemoveObjectOptions{})
	}()
	fail := func(format string, args ...any) error {
		return fmt.Errorf("s3store: check conditional writes on bucket %s: "+format, append([]any{s.bucket}, args...)...)
	}
	data := func() []byte {
		b, _ := valueBody([]byte("probe"))
		return b
	}
	// put checks that the reply's ETag is the MD5 of the body.
	etag, err := s.put(ctx, name, data(), "")
	if err != nil {
		return fail("create-only PUT of a new object: %w", ctxErr(ctx, err))
	}
	if _, etag2, err := s.readOnce(ctx, name); err != nil {
		return fail("GET of the probe: %w", ctxErr(ctx, err))
	} else if !sameETag(etag2, etag) {
		return fail("GET gave ETag %q, want %q, the MD5 of the body: this store needs MD5 ETags (no SSE-KMS, no checksum-based ETags)", etag2, etag)
	}
	if _, err := s.put(ctx, name, data(), ""); !isPreconditionFailed(err) {
		return fail("create-only PUT over an existing object gave %v, want 412 Precondition Failed: the server ignores If-None-Match", err)
	}
	if _, err := s.put(ctx, name, data(), "0123456789abcdef0123456789abcdef"); !isPreconditionFailed(err) {
		return fail("PUT with a wrong If-Match gave %v, want 412 Precondition Failed: the server ignores If-Match", err)
	}
	if _, err := s.put(ctx, name, tombstoneBody, etag); err != nil {
		return fail("PUT with the current ETag in If-Match: %w", ctxErr(ctx, err))
	}
	if _, err := s.put(ctx, name, data(), TombstoneETag); err != nil {
		return fail("PUT with If-Match on a tombstone's ETag: %w", ctxErr(ctx, err))
	}
	return nil
}

// Close implements persistence.Store. The store holds no resources of its own (the client is the caller's);
// later calls fail.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}
