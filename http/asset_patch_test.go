package http

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"filigrane/actors"
)

func nested(levels int) string {
	return strings.Repeat(`{"a":`, levels) + "1" + strings.Repeat("}", levels)
}

func TestParseAssetPatch(t *testing.T) {
	big := `{"k":"` + strings.Repeat("x", maxMetadataBytes) + `"}`
	cases := []struct {
		name, body string
		code       Code // "" when valid
	}{
		{"name only", `{"version":1,"name":"Holiday"}`, ""},
		{"metadata only", `{"version":3,"metadata":{"a":[1,2,{"b":null}],"c":true}}`, ""},
		{"both", `{"version":1,"name":"x","metadata":{}}`, ""},
		{"unicode name", `{"version":1,"name":"Été à Zürich 📷"}`, ""},
		{"not json", `{"version":1,`, CodeMalformedJSON},
		{"trailing garbage", `{"version":1,"name":"a"} x`, CodeMalformedJSON},
		{"invalid utf8", "{\"version\":1,\"name\":\"\xff\"}", CodeMalformedJSON},
		{"array body", `[1]`, CodeInvalidRequest},
		{"no version", `{"name":"a"}`, CodeInvalidRequest},
		{"string version", `{"version":"1","name":"a"}`, CodeInvalidRequest},
		{"fraction version", `{"version":1.5,"name":"a"}`, CodeInvalidRequest},
		{"zero version", `{"version":0,"name":"a"}`, CodeInvalidRequest},
		{"nothing to change", `{"version":1}`, CodeInvalidRequest},
		{"unknown field", `{"version":1,"name":"a","tags":[]}`, CodeInvalidRequest},
		{"duplicate field", `{"version":1,"name":"a","name":"b"}`, CodeInvalidRequest},
		{"empty name", `{"version":1,"name":""}`, CodeInvalidRequest},
		{"null name", `{"version":1,"name":null}`, CodeInvalidRequest},
		{"long name", `{"version":1,"name":"` + strings.Repeat("é", 201) + `"}`, CodeInvalidRequest},
		{"200 char name", `{"version":1,"name":"` + strings.Repeat("é", 200) + `"}`, ""},
		{"control in name", `{"version":1,"name":"a\u0007b"}`, CodeInvalidRequest},
		{"newline in name", `{"version":1,"name":"a\nb"}`, CodeInvalidRequest},
		{"metadata array", `{"version":1,"metadata":[1]}`, CodeInvalidRequest},
		{"metadata null", `{"version":1,"metadata":null}`, CodeInvalidRequest},
		{"dotted key", `{"version":1,"metadata":{"a.b":1}}`, CodeInvalidRequest},
		{"nested dotted key", `{"version":1,"metadata":{"a":[{"b.c":1}]}}`, CodeInvalidRequest},
		{"dollar key", `{"version":1,"metadata":{"$set":1}}`, CodeInvalidRequest},
		{"dollar inside key", `{"version":1,"metadata":{"a$":1}}`, ""},
		{"nul key", `{"version":1,"metadata":{"a\u0000":1}}`, CodeInvalidRequest},
		{"empty key", `{"version":1,"metadata":{"":1}}`, CodeInvalidRequest},
		{"long key", `{"version":1,"metadata":{"` + strings.Repeat("k", 101) + `":1}}`, CodeInvalidRequest},
		{"100 char key", `{"version":1,"metadata":{"` + strings.Repeat("k", 100) + `":1}}`, ""},
		{"duplicate key", `{"version":1,"metadata":{"a":1,"a":2}}`, CodeInvalidRequest},
		{"8 levels", `{"version":1,"metadata":` + nested(8) + `}`, ""},
		{"9 levels", `{"version":1,"metadata":` + nested(9) + `}`, CodeInvalidRequest},
		{"9 levels via arrays", `{"version":1,"metadata":{"a":[[[[[[[[1]]]]]]]]}}`, CodeInvalidRequest},
		{"8 levels via arrays", `{"version":1,"metadata":{"a":[[[[[[[1]]]]]]]}}`, ""},
		{"too big", `{"version":1,"metadata":` + big + `}`, CodeInvalidRequest},
		{"whitespace does not count", `{"version":1,"metadata":{"k":"` + strings.Repeat("x", maxMetadataBytes-8) + `"` + strings.Repeat(" ", 100) + `}}`, ""},
		{"max int", `{"version":1,"metadata":{"n":9223372036854775807,"m":-9223372036854775808}}`, ""},
		{"int overflow", `{"version":1,"metadata":{"n":9223372036854775808}}`, CodeInvalidRequest},
		{"int underflow", `{"version":1,"metadata":{"n":[-9223372036854775809]}}`, CodeInvalidRequest},
		{"float overflow", `{"version":1,"metadata":{"n":1e400}}`, CodeInvalidRequest},
		{"float ok", `{"version":1,"metadata":{"n":-1.5e300,"m":0.1}}`, ""},
	}
	for _, c := range cases {
		_, aerr := parseAssetPatch([]byte(c.body))
		var got Code
		if aerr != nil {
			got = aerr.code
		}
		if got != c.code {
			t.Errorf("%s: got %q (%v), want %q", c.name, got, aerr, c.code)
		}
	}
}

func TestParseAssetPatchValues(t *testing.T) {
	p, aerr := parseAssetPatch([]byte(`{"metadata":{"n":9223372036854775807,"f":2.5,"s":"x","l":[true,null]},"version":7,"name":"n"}`))
	if aerr != nil {
		t.Fatal(aerr)
	}
	want := map[string]any{"n": int64(math.MaxInt64), "f": 2.5, "s": "x", "l": []any{true, nil}}
	if p.Version != 7 || p.Name == nil || *p.Name != "n" || !p.SetMetadata || !reflect.DeepEqual(p.Metadata, want) {
		t.Fatalf("patch %+v", p)
	}
}

// checkMetadataShape asserts the rules an accepted metadata value must satisfy, walking the decoded value.
func checkMetadataShape(t *testing.T, v any, depth int) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		if depth > maxMetadataDepth {
			t.Fatalf("accepted depth %d", depth)
		}
		for k, e := range x {
			if msg := checkMetadataKey(k); msg != "" {
				t.Fatalf("accepted key %q: %s", k, msg)
			}
			checkMetadataShape(t, e, depth+1)
		}
	case []any:
		if depth > maxMetadataDepth {
			t.Fatalf("accepted depth %d", depth)
		}
		for _, e := range x {
			checkMetadataShape(t, e, depth+1)
		}
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			t.Fatalf("accepted %v", x)
		}
	case int64, string, bool, nil:
	default:
		t.Fatalf("accepted a %T", v)
	}
}

// FuzzParseAssetPatch checks that the PATCH validator never panics, answers only 400 or 422 codes, and that
// what it accepts obeys every rule and survives a round trip through JSON unchanged.
func FuzzParseAssetPatch(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"name":"Holiday"}`,
		`{"version":2,"metadata":{"a":[1,2.5,{"b":null}],"c":true,"d":"x"}}`,
		`{"version":1,"name":"a","metadata":{}}`,
		`{"version":1,"metadata":{"n":9223372036854775807}}`,
		`{"version":1,"metadata":{"n":1e400}}`,
		`{"version":1,"metadata":{"a.b":1,"$c":2}}`,
		`{"version":1,"metadata":` + nested(9) + `}`,
		`{"version":1,"name":"a","name":"b"}`,
		`{"version":1,`,
		`[]`, `null`, `"x"`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, aerr := parseAssetPatch(body)
		if aerr != nil {
			if aerr.code != CodeMalformedJSON && aerr.code != CodeInvalidRequest {
				t.Fatalf("code %s for %q", aerr.code, body)
			}
			if aerr.code == CodeMalformedJSON && json.Valid(body) && utf8.Valid(body) {
				t.Fatalf("valid JSON called malformed: %q", body)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		if p.Version < 1 || (p.Name == nil && !p.SetMetadata) {
			t.Fatalf("accepted %+v", p)
		}
		if p.Name != nil && checkAssetName(*p.Name) != "" {
			t.Fatalf("accepted name %q", *p.Name)
		}
		if !p.SetMetadata {
			return
		}
		if p.Metadata == nil {
			t.Fatal("accepted metadata decoded to nil")
		}
		checkMetadataShape(t, p.Metadata, 1)
		again, err := json.Marshal(map[string]any{"version": p.Version, "metadata": p.Metadata})
		if err != nil {
			t.Fatalf("accepted metadata does not encode: %v", err)
		}
		// Re-encoding may grow the text (escapes, number spelling), so only a copy within the size limit must
		// parse again, to the same value.
		if len(again) <= maxMetadataBytes {
			p2, aerr := parseAssetPatch(again)
			if aerr != nil {
				t.Fatalf("re-encoded metadata refused: %v (%s)", aerr, again)
			}
			if !reflect.DeepEqual(p2.Metadata, p.Metadata) {
				t.Fatalf("round trip changed metadata: %#v vs %#v", p2.Metadata, p.Metadata)
			}
		}
	})
}

func TestParseByteRange(t *testing.T) {
	const size = 1000
	cases := []struct {
		h             string
		start, length int64
		whole, bad    bool
	}{
		{"", 0, size, true, false},
		{"bytes=0-99", 0, 100, false, false},
		{"bytes=100-", 100, 900, false, false},
		{"bytes=-10", 990, 10, false, false},
		{"bytes=-5000", 0, size, false, false},
		{"bytes=990-5000", 990, 10, false, false},
		{"bytes=999-999", 999, 1, false, false},
		{"bytes=1000-", 0, 0, false, true},
		{"bytes=5-4", 0, 0, false, true},
		{"bytes=-0", 0, 0, false, true},
		{"bytes=abc", 0, 0, false, true},
		{"bytes=1-2x", 0, 0, false, true},
		{"bytes=+1-2", 0, 0, false, true},
		{"bytes", 0, 0, false, true},
		{"bytes=0-1,5-6", 0, size, true, false},
		{"items=0-1", 0, size, true, false},
		{"bytes=99999999999999999999-", 0, 0, false, true},
	}
	for _, c := range cases {
		start, length, whole, err := parseByteRange(c.h, size)
		if (err != nil) != c.bad || !c.bad && (start != c.start || length != c.length || whole != c.whole) {
			t.Errorf("%q: got %d+%d whole=%v err=%v", c.h, start, length, whole, err)
		}
	}
	if _, _, _, err := parseByteRange("bytes=-1", 0); err == nil {
		t.Error("a suffix range of an empty file was satisfied")
	}
}

func TestAssetCursorBinding(t *testing.T) {
	pos := "09223372036854775807/ast_0123456789abcdef0123456789abcdef"
	f := actors.AssetFilter{Kind: actors.AssetSource}
	c := encodeCursor("org_1", f, pos)
	if got, ok := decodeCursor("org_1", f, c); !ok || got != pos {
		t.Fatalf("round trip: %q %v", got, ok)
	}
	if _, ok := decodeCursor("org_2", f, c); ok {
		t.Fatal("cursor accepted by another organization")
	}
	if _, ok := decodeCursor("org_1", actors.AssetFilter{}, c); ok {
		t.Fatal("cursor accepted with other filters")
	}
	b := []byte(c)
	b[len(b)-3] ^= 1
	if _, ok := decodeCursor("org_1", f, string(b)); ok {
		t.Fatal("tampered cursor accepted")
	}
	for _, bad := range []string{"", "!!", "AQ", strings.Repeat("A", 300)} {
		if _, ok := decodeCursor("org_1", f, bad); ok {
			t.Fatalf("garbage cursor %q accepted", bad)
		}
	}
}

// FuzzParseByteRange checks that an accepted range always lies within the file.
func FuzzParseByteRange(f *testing.F) {
	for _, s := range []string{"bytes=0-99", "bytes=-10", "bytes=100-", "bytes=5-4", "bytes=0-1,2-3", "items=1-2", "bytes=-0", ""} {
		f.Add(s, int64(1000))
	}
	f.Add("bytes=0-", int64(0))
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			size = -(size + 1)
		}
		start, length, whole, err := parseByteRange(h, size)
		switch {
		case err != nil:
		case whole:
			if start != 0 || length != size {
				t.Fatalf("%q of %d: whole file as %d+%d", h, size, start, length)
			}
		case start < 0 || length < 1 || start > size-length:
			t.Fatalf("%q of %d: range %d+%d outside the file", h, size, start, length)
		}
	})
}

// FuzzDecodeCursor checks that no input but a cursor this server made for the same organization and filters
// yields a position, and that such a position is well formed.
func FuzzDecodeCursor(f *testing.F) {
	filter := actors.AssetFilter{Kind: actors.AssetWatermarked}
	f.Add(encodeCursor("org_1", filter, "09223372036854775807/ast_0123456789abcdef0123456789abcdef"))
	f.Add("AQ")
	f.Add("")
	f.Fuzz(func(t *testing.T, cursor string) {
		pos, ok := decodeCursor("org_1", filter, cursor)
		if !ok {
			return
		}
		if !actors.ValidListPosition(pos) || encodeCursor("org_1", filter, pos) != cursor {
			t.Fatalf("accepted %q as %q", cursor, pos)
		}
		if _, ok := decodeCursor("org_2", filter, cursor); ok {
			t.Fatalf("%q accepted by two organizations", cursor)
		}
	})
}
