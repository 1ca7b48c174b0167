// Package whsign signs webhook deliveries and verifies them, in the two header schemes Filigrane sends side
// by side so that receivers written for either verify unchanged:
//
//   - Standard Webhooks: `webhook-id`, `webhook-timestamp` (Unix seconds) and `webhook-signature`, a
//     space-separated list of `v1,<base64 HMAC-SHA256>` over `id.timestamp.body`, keyed with the base64-decoded
//     part of the secret after `whsec_`. During a secret rotation the list carries one signature per secret
//     still valid.
//   - Etchv-compatible: `X-Etchv-Event-ID`, `X-Etchv-Timestamp` and `X-Etchv-Signature: v1=<hex HMAC-SHA256>`
//     over `timestamp.body`, keyed with the whole secret string (`whsec_` included). Etchv receivers compare
//     one exact value, so this header carries the current secret's signature only; during a rotation the
//     previous secret's goes in `X-Filigrane-Previous-Signature`.
//
// The package is pure (no I/O, no clock of its own); it must not decide which secrets are valid: callers pass
// them.
package whsign

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header names.
const (
	HeaderID                = "webhook-id"
	HeaderTimestamp         = "webhook-timestamp"
	HeaderSignature         = "webhook-signature"
	HeaderEtchvID           = "X-Etchv-Event-ID"
	HeaderEtchvTimestamp    = "X-Etchv-Timestamp"
	HeaderEtchvSignature    = "X-Etchv-Signature"
	HeaderPreviousSignature = "X-Filigrane-Previous-Signature"
)

// SecretPrefix starts every signing secret.
const SecretPrefix = "whsec_"

// secretBytes is the secret's entropy: 24 bytes encode to 32 base64 characters without padding.
const secretBytes = 24

// Tolerance is how far a delivery's timestamp may be from the receiver's clock (both schemes use 5 minutes).
const Tolerance = 5 * time.Minute

// ErrInvalidSecret is returned for a secret that is not `whsec_` + standard base64.
var ErrInvalidSecret = errors.New("whsign: the secret is not whsec_ followed by base64")

// ErrVerify is wrapped by every verification failure.
var ErrVerify = errors.New("whsign: signature does not verify")

// NewSecret returns a fresh secret: `whsec_` + base64 of 24 random bytes. Its base64 part decodes, so the
// same secret keys both schemes.
func NewSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("whsign: random secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// standardKey is the Standard Webhooks HMAC key of secret.
func standardKey(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, ErrInvalidSecret
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(key) == 0 {
		return nil, ErrInvalidSecret
	}
	return key, nil
}

// StandardSignature returns `v1,<base64 HMAC-SHA256(key, id.timestamp.body)>`.
func StandardSignature(secret, id string, timestamp int64, body []byte) (string, error) {
	key, err := standardKey(secret)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
}

// EtchvSignature returns `v1=<hex HMAC-SHA256(secret string, timestamp.body)>`.
func EtchvSignature(secret string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(timestamp, 10) + "."))
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Header is one header to send.
type Header struct{ Name, Value string }

// Sign returns the headers of one delivery attempt of event id with body at ts. secrets lists the valid
// secrets, the current one first and then any previous one still inside its overlap window.
func Sign(secrets []string, id string, ts time.Time, body []byte) ([]Header, error) {
	if len(secrets) == 0 {
		return nil, errors.New("whsign: no secret to sign with")
	}
	unix := ts.Unix()
	stamp := strconv.FormatInt(unix, 10)
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		sig, err := StandardSignature(s, id, unix, body)
		if err != nil {
			return nil, err
		}
		sigs = append(sigs, sig)
	}
	out := []Header{
		{HeaderID, id}, {HeaderTimestamp, stamp}, {HeaderSignature, strings.Join(sigs, " ")},
		{HeaderEtchvID, id}, {HeaderEtchvTimestamp, stamp}, {HeaderEtchvSignature, EtchvSignature(secrets[0], unix, body)},
	}
	if len(secrets) > 1 {
		out = append(out, Header{HeaderPreviousSignature, EtchvSignature(secrets[1], unix, body)})
	}
	return out, nil
}

// Getter reads a request header by name (http.Header.Get fits).
type Getter func(name string) string

func checkTimestamp(text string, now time.Time) (int64, error) {
	if text == "" || len(text) > 12 || strings.TrimLeft(text, "0123456789") != "" {
		return 0, fmt.Errorf("%w: malformed timestamp %q", ErrVerify, text)
	}
	ts, _ := strconv.ParseInt(text, 10, 64)
	if d := now.Sub(time.Unix(ts, 0)); d > Tolerance || d < -Tolerance {
		return 0, fmt.Errorf("%w: timestamp %d is more than %s from now", ErrVerify, ts, Tolerance)
	}
	return ts, nil
}

// VerifyStandard checks the Standard Webhooks headers of body against secret at now.
func VerifyStandard(secret string, get Getter, body []byte, now time.Time) error {
	ts, err := checkTimestamp(get(HeaderTimestamp), now)
	if err != nil {
		return err
	}
	want, err := StandardSignature(secret, get(HeaderID), ts, body)
	if err != nil {
		return err
	}
	for _, sig := range strings.Fields(get(HeaderSignature)) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return ErrVerify
}

// VerifyEtchv checks the Etchv-compatible headers of body against secret at now, as Etchv receivers do.
func VerifyEtchv(secret string, get Getter, body []byte, now time.Time) error {
	ts, err := checkTimestamp(get(HeaderEtchvTimestamp), now)
	if err != nil {
		return err
	}
	if !hmac.Equal([]byte(get(HeaderEtchvSignature)), []byte(EtchvSignature(secret, ts, body))) {
		return ErrVerify
	}
	return nil
}
