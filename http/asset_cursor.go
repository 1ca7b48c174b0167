package http

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"

	"filigrane/actors"
)

// Asset list cursors are opaque to clients: base64url (no padding) of
//
//	version byte (1) | 16-byte tag | listing position ("<inverted created ns>/<asset id>")
//
// where tag = SHA-256("filigrane/asset-cursor/v1", organization, kind, media_type, watermark_id, position)
// cut to 16 bytes. A cursor therefore works only with the organization and filters that produced it (spec 4.7:
// "use the same filters and organization on every page"); anything else is 422 invalid_cursor.
//
// The tag is a fingerprint, not a keyed MAC: someone who knows this scheme can mint a cursor for their own
// organization, and all it gives them is a listing of their own assets starting at a position of their choice.
// The position never leaves the organization's index prefix, so no secret (and no key rotation across nodes)
// is needed.
const cursorVersion = 1

const cursorTagLen = 16

func cursorTag(orgID string, f actors.AssetFilter, pos string) []byte {
	h := sha256.New()
	for _, part := range []string{"filigrane/asset-cursor/v1", orgID, f.Kind, f.MediaType, f.WatermarkID, pos} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return h.Sum(nil)[:cursorTagLen]
}

// encodeCursor wraps a listing position into a cursor for orgID and f.
func encodeCursor(orgID string, f actors.AssetFilter, pos string) string {
	b := make([]byte, 0, 1+cursorTagLen+len(pos))
	b = append(b, cursorVersion)
	b = append(b, cursorTag(orgID, f, pos)...)
	b = append(b, pos...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor returns the listing position of a cursor made by encodeCursor for the same orgID and f; ok is
// false for anything else.
func decodeCursor(orgID string, f actors.AssetFilter, cursor string) (string, bool) {
	if len(cursor) > 256 {
		return "", false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(cursor)
	if err != nil || len(b) < 1+cursorTagLen || b[0] != cursorVersion {
		return "", false
	}
	pos := string(b[1+cursorTagLen:])
	if !actors.ValidListPosition(pos) || !bytes.Equal(b[1:1+cursorTagLen], cursorTag(orgID, f, pos)) {
		return "", false
	}
	return pos, true
}
