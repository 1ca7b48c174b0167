package persistence

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidKey is wrapped by errors about keys that a backend refuses (empty store keys, unsafe blob keys).
var ErrInvalidKey = errors.New("persistence: invalid key")

// PrefixEnd returns the smallest key that is greater than every key starting with prefix, for use as an
// exclusive upper bound. It returns nil when no such key exists (prefix is empty or all 0xff bytes): the
// range then runs to the end of the keyspace.
func PrefixEnd(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			end := make([]byte, i+1)
			copy(end, prefix)
			end[i]++
			return end
		}
	}
	return nil
}

// KeyAfter returns the smallest key strictly greater than key (key followed by a zero byte). Pass it as the
// start of the next Scan page to resume after the last item of the previous page.
func KeyAfter(key []byte) []byte {
	next := make([]byte, len(key)+1)
	copy(next, key)
	return next
}

// MaxBlobKeyLen bounds blob keys so that every backend can map them to a path or object name (S3 allows
// 1024 bytes; filesystem backends add suffixes).
const MaxBlobKeyLen = 512

// MaxBlobSegmentLen bounds one segment of a blob key: file-backed servers (the filesystem backend, versitygw's
// posix backend) turn segments into file names, which are limited to 255 bytes.
const MaxBlobSegmentLen = 200

// ValidateBlobKey reports whether key is a safe blob key: a relative slash-separated path of non-empty
// segments, none of them "." or "..", without NUL or backslash, at most MaxBlobKeyLen bytes and
// MaxBlobSegmentLen bytes per segment. Backends map keys to file paths and object names, so a key that could
// escape the root or alias another key is refused rather than cleaned.
func ValidateBlobKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty blob key", ErrInvalidKey)
	}
	if len(key) > MaxBlobKeyLen {
		return fmt.Errorf("%w: blob key longer than %d bytes", ErrInvalidKey, MaxBlobKeyLen)
	}
	if strings.ContainsAny(key, "\x00\\") {
		return fmt.Errorf("%w: blob key %q contains NUL or backslash", ErrInvalidKey, key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w: blob key %q has an empty segment or a leading/trailing slash", ErrInvalidKey, key)
		case ".", "..":
			return fmt.Errorf("%w: blob key %q has a %q segment", ErrInvalidKey, key, seg)
		}
		if len(seg) > MaxBlobSegmentLen {
			return fmt.Errorf("%w: blob key %q has a segment longer than %d bytes", ErrInvalidKey, key, MaxBlobSegmentLen)
		}
	}
	return nil
}
