package persistence

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// ErrUnknownSchema is wrapped by Unmarshal when a record carries a schema version the caller does not know.
// It means the data was written by a newer (or corrupted) build: the caller must stop, not guess.
var ErrUnknownSchema = errors.New("persistence: unknown record schema version")

// Record is a value stored through Marshal. SchemaVersion names the layout of the type; bump it when a change
// is not readable by older code (renamed or re-typed fields), and keep the old type around to migrate from.
// It must be callable on the zero value (Unmarshal asks the destination before decoding into it).
type Record interface {
	SchemaVersion() uint16
}

// Marshal encodes r as a msgpack array [schema version, record]. The envelope is plain msgpack so records stay
// readable with generic msgpack tools.
func Marshal(r Record) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := enc.EncodeArrayLen(2); err != nil {
		return nil, fmt.Errorf("persistence: marshal %T: %w", r, err)
	}
	if err := enc.EncodeUint16(r.SchemaVersion()); err != nil {
		return nil, fmt.Errorf("persistence: marshal %T: %w", r, err)
	}
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("persistence: marshal %T: %w", r, err)
	}
	return buf.Bytes(), nil
}

// Unmarshal decodes data written by Marshal into r (a pointer). It fails with ErrUnknownSchema when the stored
// schema version differs from r.SchemaVersion(); use SchemaOf first to dispatch to an older type when migrating.
// Trailing bytes are an error: a record is exactly one envelope.
func Unmarshal(data []byte, r Record) error {
	rd := bytes.NewReader(data)
	dec := msgpack.NewDecoder(rd)
	got, err := decodeHeader(dec)
	if err != nil {
		return fmt.Errorf("persistence: unmarshal %T: %w", r, err)
	}
	if want := r.SchemaVersion(); got != want {
		return fmt.Errorf("persistence: unmarshal %T: stored schema %d, this build reads %d: %w", r, got, want, ErrUnknownSchema)
	}
	if err := dec.Decode(r); err != nil {
		return fmt.Errorf("persistence: unmarshal %T: %w", r, err)
	}
	if rd.Len() != 0 {
		return fmt.Errorf("persistence: unmarshal %T: %d trailing bytes", r, rd.Len())
	}
	return nil
}

// SchemaOf returns the schema version of a record written by Marshal without decoding the record.
func SchemaOf(data []byte) (uint16, error) {
	v, err := decodeHeader(msgpack.NewDecoder(bytes.NewReader(data)))
	if err != nil {
		return 0, fmt.Errorf("persistence: schema of record: %w", err)
	}
	return v, nil
}

func decodeHeader(dec *msgpack.Decoder) (uint16, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return 0, fmt.Errorf("not a record envelope: %w", err)
	}
	if n != 2 {
		return 0, fmt.Errorf("not a record envelope: array of %d elements, want 2", n)
	}
	v, err := dec.DecodeUint16()
	if err != nil {
		return 0, fmt.Errorf("not a record envelope: schema version: %w", err)
	}
	return v, nil
}
