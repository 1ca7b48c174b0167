package pdf

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
		// The parser reads a stream whose keyword is followed by spaces before the end of line, or by its data
		// at once: the scan counts them too.
		{"spaces after the keyword", "%PDF-1.7\n" + strings.ReplaceAll(stream(4, "/Type /ObjStm /N 1 /First 4 /Filter /FlateDecode", deflated(600<<10))+
			stream(5, "/Type /ObjStm /N 1 /First 4 /Filter /FlateDecode", deflated(600<<10)), "stream\n", "stream  \n"), CodeTooLarge},
		{"data right after the keyword", "%PDF-1.7\n" + strings.ReplaceAll(stream(4, "/Type /ObjStm /N 1 /First 4 /Filter /FlateDecode", deflated(600<<10))+
			stream(5, "/Type /ObjStm /N 1 /First 4 /Filter /FlateDecode", deflated(600<<10)), ">>\nstream\n", ">>\nstream"), CodeTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "in.pdf")
			if err := os.WriteFile(path, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			err := checkObjectStreams(path, limit, DefaultLimits().MaxObjects, DefaultLimits().MaxTokens)
			if CodeOf(err) != tc.code || (tc.code == "" && err != nil) {
				t.Fatalf("err = %v, want code %q", err, tc.code)
			}
		})
	}
}

// TestSharedOffsetsAreRefused: cross-reference sections naming many objects at one offset (pdfcpu parses and
// keeps one object per entry) are refused, in a classic table and in a stream, with and without the PNG
// predictor; a table of distinct offsets passes.
func TestSharedOffsetsAreRefused(t *testing.T) {
	const n = 3000
	head := "%PDF-1.7\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n"
	classic := func(distinct bool) string {
		var b strings.Builder
		b.WriteString(head)
		fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", n+1)
		for i := range n {
			off := 9
			if distinct {
				off = 9 + i
			}
			fmt.Fprintf(&b, "%010d 00000 n \n", off)
		}
		b.WriteString("trailer\n<< /Size 3001 /Root 1 0 R >>\nstartxref\n60\n%%EOF\n")
		return b.String()
	}
	rows := func(predict bool) []byte {
		var b bytes.Buffer
		var prev [7]byte
		for i := range n {
			row := [7]byte{1, 0, 0, 0, 9, 0, 0}
			if i == 0 {
				row = [7]byte{0, 0, 0, 0, 0, 0xff, 0xff}
			}
			if predict { // PNG "Up": each byte less the one above
				b.WriteByte(2)
				for j := range row {
					b.WriteByte(row[j] - prev[j])
				}
				prev = row
				continue
			}
			b.Write(row[:])
		}
		var z bytes.Buffer
		zw := zlib.NewWriter(&z)
		zw.Write(b.Bytes())
		zw.Close()
		return z.Bytes()
	}
	xrefStream := func(parms string, data []byte) string {
		return head + fmt.Sprintf("2 0 obj\n<< /Type /XRef /Size %d /W [1 4 2] /Root 1 0 R /Filter /FlateDecode %s /Length %d >>\nstream\n%s\nendstream\nendobj\nstartxref\n60\n%%%%EOF\n",
			n, parms, len(data), data)
	}
	cases := []struct {
		name string
		doc  string
		code Code
	}{
		{"classic table, one offset", classic(false), CodeTooLarge},
		{"classic table, distinct offsets", classic(true), ""},
		{"stream, one offset", xrefStream("", rows(false)), CodeTooLarge},
		{"stream with predictor, one offset", xrefStream("/DecodeParms << /Columns 7 /Predictor 12 >>", rows(true)), CodeTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "in.pdf")
			if err := os.WriteFile(path, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			err := checkObjectStreams(path, 1<<20, DefaultLimits().MaxObjects, DefaultLimits().MaxTokens)
			if CodeOf(err) != tc.code || (tc.code == "" && err != nil) {
				t.Fatalf("err = %v, want code %q", err, tc.code)
			}
		})
	}
}
