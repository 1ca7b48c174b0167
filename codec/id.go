package codec

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// String returns the id as 64 lowercase hex characters.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// ParseID parses 64 hex characters (either case).
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 2*len(id) {
		return ID{}, fmt.Errorf("codec: id must be %d hex characters, got %d", 2*len(id), len(s))
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return ID{}, fmt.Errorf("codec: id is not hex: %w", err)
	}
	return id, nil
}

// IDFromJSON canonicalizes a JSON value (RFC 8785) and returns its SHA-256 as an ID.
func IDFromJSON(data []byte) (ID, error) {
	canon, err := CanonicalJSON(data)
	if err != nil {
		return ID{}, err
	}
	return ID(sha256.Sum256(canon)), nil
}

// bits returns the 256 bits of id, MSB first, one per byte.
func (id ID) bits() []uint8 {
	b := make([]uint8, idBits)
	for i := range b {
		b[i] = (id[i/8] >> (7 - uint(i%8))) & 1
	}
	return b
}
