package pdf

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestObjectStreamScan: what the pre-parse scan of object and cross-reference streams refuses and lets through.
func TestObjectStreamScan(t *testing.T) {
	deflated := func(n int) []byte {
		var b bytes.Buffer
		zw := zlib.NewWriter(&b)
		zw.Write(bytes.Repeat([]byte(" "), n))
		zw.Close()
		return b.Bytes()
	}
	stream := func(nr int, dict string, data []byte) string {
		return fmt.Sprintf("%d 0 obj\n<< %s /Length %d >>\nstream\n%s\nendstream\nendobj\n", nr, dict, len(data), data)
	}
	const limit = 1 << 20
	cases := []struct {
		name string
		doc  string
		code Code // "" when it passes
	}{
		{"object streams under the limit together", "%PDF-1.7\n" + stream(4, "/Type /ObjStm /N 1 /First 4 /Filter /FlateDecode", deflated(400<<10)) +
			stream(5, "/Type /ObjStm /N 1 /First 4 /Filter /FlateDecode", deflated(400<<10)), ""},
		{"object streams over the limit together", "%PDF-1.7\n" + stream(4, "/Type /ObjStm /N 1 /First 4 /Filter /FlateDecode", deflated(600<<10)) +
			stream(5, "/Type /XRef /Size 6 /W [1 4 2] /Filter /Fl", deflated(600<<10)), CodeTooLarge},
		{"escaped type name", "%PDF-1.7\n" + stream(4, "/Type /Obj#53tm /N 1 /First 4 /Filter /FlateDecode", deflated(2<<20)), CodeTooLarge},
		// Hybrid files name /XRefStm in their trailer; an update after it may hold any stream.
		{"XRefStm trailer before an image", "%PDF-1.7\ntrailer\n<< /Size 9 /XRefStm 1234 >>\n" +
			stream(9, "/Type /XObject /Subtype /Image /Filter /DCTDecode", []byte("\xff\xd8\xff not inflated")) +
			stream(10, "/Filter /FlateDecode", deflated(2<<20)), ""},
		{"unfiltered object stream", "%PDF-1.7\n" + stream(4, "/Type /ObjStm /N 1 /First 4", bytes.Repeat([]byte(" "), 2<<20)), ""},
		{"filter named indirectly", "%PDF-1.7\n" + stream(4, "/Type /ObjStm /N 1 /First 4 /Filter 7 0 R", []byte("not zlib data")), CodeTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "in.pdf")
			if err := os.WriteFile(path, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			err := checkObjectStreams(path, limit)
			if CodeOf(err) != tc.code || (tc.code == "" && err != nil) {
				t.Fatalf("err = %v, want code %q", err, tc.code)
			}
		})
	}
}
