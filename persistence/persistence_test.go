package persistence_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"filigrane/persistence"
)

func TestPrefixEnd(t *testing.T) {
	cases := []struct{ in, want []byte }{
		{nil, nil},
		{[]byte{}, nil},
		{[]byte("a"), []byte("b")},
		{[]byte("job/"), []byte("job0")},
		{[]byte{'a', 0xff}, []byte{'b'}},
		{[]byte{'a', 0xfe, 0xff, 0xff}, []byte{'a', 0xff}},
		{[]byte{0xff, 0xff}, nil},
	}
	for _, c := range cases {
		in := bytes.Clone(c.in)
		if got := persistence.PrefixEnd(c.in); !bytes.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("PrefixEnd(%x) = %x, want %x", c.in, got, c.want)
		}
		if !bytes.Equal(in, c.in) {
			t.Errorf("PrefixEnd modified its argument")
		}
	}
}

func TestKeyAfter(t *testing.T) {
	k := []byte("abc")
	got := persistence.KeyAfter(k)
	if !bytes.Equal(got, []byte("abc\x00")) || bytes.Compare(got, k) <= 0 {
		t.Fatalf("KeyAfter = %x", got)
	}
}

func TestValidateBlobKey(t *testing.T) {
	good := []string{"a", "inputs/job-1/frame 0001.png", "a/b/c", "..a", "a..", ".hidden/x", "é/ü"}
	bad := []string{"", "/a", "a/", "a//b", ".", "..", "a/../b", "a/./b", "../x", "a/..", "a\\b", "a\x00b",
		string(bytes.Repeat([]byte("x"), persistence.MaxBlobSegmentLen+1)),
		string(bytes.Repeat([]byte("abcdefg/"), 70)) + "x"}
	for _, k := range good {
		if err := persistence.ValidateBlobKey(k); err != nil {
			t.Errorf("ValidateBlobKey(%q) = %v, want nil", k, err)
		}
	}
	for _, k := range bad {
		if err := persistence.ValidateBlobKey(k); !errors.Is(err, persistence.ErrInvalidKey) {
			t.Errorf("ValidateBlobKey(%.40q) = %v, want ErrInvalidKey", k, err)
		}
	}
}

type recV2 struct {
	Name  string `msgpack:"name"`
	Count int64  `msgpack:"count"`
}

func (recV2) SchemaVersion() uint16 { return 2 }

type recV3 struct {
	Name string `msgpack:"name"`
}

func (recV3) SchemaVersion() uint16 { return 3 }

func TestRecordRoundTrip(t *testing.T) {
	b, err := persistence.Marshal(recV2{Name: "org", Count: -7})
	if err != nil {
		t.Fatal(err)
	}
	var got recV2
	if err := persistence.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got != (recV2{Name: "org", Count: -7}) {
		t.Fatalf("round trip = %+v", got)
	}
	if v, err := persistence.SchemaOf(b); err != nil || v != 2 {
		t.Fatalf("SchemaOf = %d, %v", v, err)
	}
	// The envelope is plain msgpack: a generic decoder sees [2, {name, count}].
	var generic []any
	if err := msgpack.Unmarshal(b, &generic); err != nil || len(generic) != 2 {
		t.Fatalf("generic decode = %v, %v", generic, err)
	}
}

func TestRecordUnknownSchemaFailsLoudly(t *testing.T) {
	b, err := persistence.Marshal(recV3{Name: "new"})
	if err != nil {
		t.Fatal(err)
	}
	var old recV2
	err = persistence.Unmarshal(b, &old)
	if !errors.Is(err, persistence.ErrUnknownSchema) {
		t.Fatalf("Unmarshal of schema 3 into schema 2 = %v, want ErrUnknownSchema", err)
	}
	if old != (recV2{}) {
		t.Fatalf("Unmarshal wrote into the destination despite the schema error: %+v", old)
	}
}

func TestRecordRejectsGarbage(t *testing.T) {
	good, _ := persistence.Marshal(recV2{Name: "x"})
	raw, _ := msgpack.Marshal(recV2{Name: "x"}) // a bare record without envelope
	for name, b := range map[string][]byte{
		"empty":    nil,
		"bare":     raw,
		"trailing": append(bytes.Clone(good), 0xc0),
		"short":    good[:len(good)-1],
	} {
		var r recV2
		if err := persistence.Unmarshal(b, &r); err == nil {
			t.Errorf("%s: Unmarshal succeeded", name)
		}
	}
}
