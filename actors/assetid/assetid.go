// Package assetid owns the form of asset ids: minting one from a job's request id, telling an id from garbage,
// and mapping the short ids minted by earlier versions to their canonical form. It must not touch storage: the
// asset library (package actors) decides where a record lives.
//
// An id is "ast_" + the 64 lowercase hex digits of SHA-256("filigrane/asset/<kind>/<request id>"), the form
// Etchv's SDKs check client-side. Earlier versions kept only the first 32 digits; records stored under such a
// short id stay where they are. A short id and the full id it is the prefix of name the same asset: lookups
// accept both, and what the API shows is the full one.
package assetid

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Asset kinds, the part of the hashed text that tells the two assets of one embed apart.
const (
	KindSource      = "source"
	KindWatermarked = "watermarked"
)

const (
	prefix = "ast_"
	// Len is the length of an id minted today.
	Len = len(prefix) + 64
	// LegacyLen is the length of an id minted before ids carried the whole hash.
	LegacyLen = len(prefix) + 32
)

// For derives the id of a job's source or watermarked asset from the request id, so that a job re-applying
// its outcome after a crash writes the very same records.
func For(requestID, kind string) string {
	sum := sha256.Sum256([]byte("filigrane/asset/" + kind + "/" + requestID))
	return prefix + hex.EncodeToString(sum[:])
}

// Valid reports whether id has the form of an asset id, full or legacy, so that garbage in a path never
// reaches the store.
func Valid(id string) bool {
	if len(id) != Len && len(id) != LegacyLen || !strings.HasPrefix(id, prefix) {
		return false
	}
	for _, c := range id[len(prefix):] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// IsLegacy reports whether id is a valid id in the short form of earlier versions.
func IsLegacy(id string) bool { return len(id) == LegacyLen && Valid(id) }

// Legacy is the short form a full id had in earlier versions: where a record of that asset may be stored.
// Any other string comes back unchanged.
func Legacy(id string) string {
	if len(id) == Len && Valid(id) {
		return id[:LegacyLen]
	}
	return id
}

// Canonical is the id the API shows for the asset stored under id, minted for requestID's kind asset: the full
// id when id is the legacy prefix of it, else id unchanged (full ids, empty ids, ids of no such derivation).
func Canonical(id, requestID, kind string) string {
	if !IsLegacy(id) || requestID == "" {
		return id
	}
	if full := For(requestID, kind); full[:LegacyLen] == id {
		return full
	}
	return id
}
