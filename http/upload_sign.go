package http

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"

	"filigrane/actors"
)

// uploadSigner makes and checks signed PUT URLs. A URL names the upload and its expiry and carries an
// HMAC-SHA256 over (upload id, organization, declared size, expiry) keyed with the node's upload secret, so
// that neither the upload, nor its size, nor the expiry can be changed without the secret; the organization
// and size come from the stored record, never from the URL.
type uploadSigner struct {
	secret []byte
	base   string // e.g. http://127.0.0.1:8081, no trailing slash
}

var (
	errBadSignature = errors.New("the upload URL's signature does not match")
	errURLExpired   = errors.New("the upload URL expired")
)

func (g uploadSigner) mac(id, org string, size, expires int64) []byte {
	m := hmac.New(sha256.New, g.secret)
	m.Write([]byte("filigrane/upload-url/v1\x00" + id + "\x00" + org + "\x00" + strconv.FormatInt(size, 10) +
		"\x00" + strconv.FormatInt(expires, 10)))
	return m.Sum(nil)
}

// url is the signed PUT URL of u, valid until u.URLExpiresAt.
func (g uploadSigner) url(u *actors.Upload) string {
	exp := u.URLExpiresAt.Unix()
	return g.base + "/uploads/" + u.ID + "?expires=" + strconv.FormatInt(exp, 10) +
		"&signature=" + hex.EncodeToString(g.mac(u.ID, u.OrgID, u.Size, exp))
}

// verify checks the query of a PUT to u's URL at now. The signature is checked before the expiry, so that a
// forged expiry reads as a bad signature, not as an expired URL.
func (g uploadSigner) verify(u *actors.Upload, expires, signature string, now time.Time) error {
	exp, err := strconv.ParseInt(expires, 10, 64)
	if err != nil || strings.HasPrefix(expires, "+") {
		return errBadSignature
	}
	sig, err := hex.DecodeString(signature)
	if err != nil || !hmac.Equal(sig, g.mac(u.ID, u.OrgID, u.Size, exp)) {
		return errBadSignature
	}
	if !now.Before(time.Unix(exp, 0)) {
		return errURLExpired
	}
	return nil
}
