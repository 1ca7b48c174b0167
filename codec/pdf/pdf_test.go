package pdf

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"

	"filigrane/codec"
	"filigrane/codec/pdf/pdftest"
)

func testAdapter(t testing.TB) *Adapter {
	t.Helper()
	if _, err := exec.LookPath("mutool"); err != nil {
		t.Skip("mutool is not installed (scripts/setup.sh installs it)")
	}
	c, err := codec.New([]byte(codec.DevelopmentKey))
	if err != nil {
		t.Fatal(err)
	}
	return &Adapter{Codec: c}
}

func testID(s string) codec.ID { return codec.ID(sha256.Sum256([]byte(s))) }

// extraNr is the object number of the k-th (from 1) extra object of a makeDoc document.
var extraNr = pdftest.ExtraObject

// mutoolText extracts the text of a PDF as a reader would copy it.
func mutoolText(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("mutool", "draw", "-q", "-F", "txt", "-o", "-", path).Output()
	if err != nil {
		t.Fatalf("mutool draw txt: %v", err)
	}
	return string(out)
}

func TestEmbedKeepsDocumentAndDetects(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	src := writeTemp(t, "in.pdf", makeDoc(pdftest.Doc{Pages: 3}))
	dst := filepath.Join(t.TempDir(), "out.pdf")
	id := testID("embed-keeps")
	rep, err := a.Embed(ctx, src, dst, id, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pages != 3 || len(rep.Units) != 3 {
		t.Fatalf("report: %d pages, %d units, want 3", rep.Pages, len(rep.Units))
	}
	for i, u := range rep.Units {
		if u.Index != i || u.Width != 612 || u.Height != 792 || u.Tiles != 4*6 {
			t.Errorf("unit %d: %+v", i, u)
		}
	}
	// Still a PDF with the same pages, sizes, text, link, outline and metadata.
	ctxOut, err := api.ReadContextFile(dst)
	if err != nil {
		t.Fatalf("output does not parse: %v", err)
	}
	dims, err := ctxOut.XRefTable.PageDims()
	if err != nil || len(dims) != 3 {
		t.Fatalf("page dims %v %v", dims, err)
	}
	for _, d := range dims {
		if d.Width != 612 || d.Height != 792 {
			t.Errorf("page size %vx%v, want 612x792", d.Width, d.Height)
		}
	}
	text := mutoolText(t, dst)
	for p := 1; p <= 3; p++ {
		if want := fmt.Sprintf("Filigrane test page %d", p); !strings.Contains(text, want) {
			t.Errorf("text %q lost in the marked file", want)
		}
	}
	raw, _ := exec.Command("mutool", "show", dst, "outline").Output()
	if !strings.Contains(string(raw), "Chapter one") {
		t.Errorf("outline lost: %q", raw)
	}
	if uri := firstLinkURI(t, ctxOut); uri != "https://example.org/filigrane" {
		t.Errorf("link lost: %q", uri)
	}
	info, _ := exec.Command("mutool", "show", dst, "trailer/Info/Title").Output()
	if !strings.Contains(string(info), "Filigrane test document") {
		t.Errorf("title lost: %q", info)
	}

	want := id.String()
	for name, detect := range map[string]func(context.Context, string) (codec.Detection, error){
		"structural": a.Detect, "rendered": a.DetectRendered,
	} {
		d, err := detect(ctx, dst)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != want {
			t.Fatalf("%s: watermarked %v id %v, want %s", name, d.Watermarked, d.WatermarkID, want)
		}
		if len(d.Units) != 3 {
			t.Fatalf("%s: %d units, want 3", name, len(d.Units))
		}
		for i, u := range d.Units {
			if u.Index != i || !u.Watermarked || u.WatermarkID == nil || *u.WatermarkID != want {
				t.Errorf("%s: unit %d: %+v", name, i, u)
			}
		}
	}
}

func TestMarkSurvivesMutoolResaveAndPageExtraction(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	dir := t.TempDir()
	src := writeTemp(t, "in.pdf", makeDoc(pdftest.Doc{Pages: 2}))
	marked := filepath.Join(dir, "marked.pdf")
	id := testID("resave")
	if _, err := a.Embed(ctx, src, marked, id, Options{}); err != nil {
		t.Fatal(err)
	}
	clean := filepath.Join(dir, "clean.pdf")
	if out, err := exec.Command("mutool", "clean", "-gggz", marked, clean).CombinedOutput(); err != nil {
		t.Fatalf("mutool clean: %v %s", err, out)
	}
	page := filepath.Join(dir, "page2.pdf")
	if err := api.ExtractPagesFile(marked, dir, []string{"2"}, nil); err != nil {
		t.Fatalf("extract: %v", err)
	}
	m, _ := filepath.Glob(filepath.Join(dir, "marked_page_2.pdf"))
	if len(m) != 1 {
		t.Fatalf("extracted page not found")
	}
	page = m[0]
	for _, f := range []string{clean, page} {
		d, err := a.Detect(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Watermarked || *d.WatermarkID != id.String() {
			t.Errorf("%s: not recovered: %+v", filepath.Base(f), d)
		}
		d, err = a.DetectRendered(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Watermarked || *d.WatermarkID != id.String() {
			t.Errorf("%s: visual layer not recovered: %+v", filepath.Base(f), d)
		}
	}
}

func TestScreenshotOfMarkedPageIsDetectedAsImage(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	dir := t.TempDir()
	src := writeTemp(t, "in.pdf", makeDoc(pdftest.Doc{Pages: 1}))
	marked := filepath.Join(dir, "marked.pdf")
	id := testID("screenshot")
	if _, err := a.Embed(ctx, src, marked, id, Options{}); err != nil {
		t.Fatal(err)
	}
	g := drawGray(t, marked, 96) // 100% zoom: 96 pixels per inch
	d := a.Codec.DetectLuma8(g.Pix, g.Width, g.Height, g.Width)
	if !d.Watermarked || *d.WatermarkID != id.String() {
		t.Fatalf("screenshot: %+v", d)
	}
}

func TestUnmarkedPDFIsNotWatermarked(t *testing.T) {
	a := testAdapter(t)
	src := writeTemp(t, "in.pdf", makeDoc(pdftest.Doc{Pages: 2}))
	d, err := a.Detect(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if d.Watermarked || d.WatermarkID != nil || len(d.Units) != 2 {
		t.Fatalf("unmarked: %+v", d)
	}
	for _, u := range d.Units {
		if u.Watermarked {
			t.Errorf("unit %d watermarked", u.Index)
		}
	}
}

func TestForgedStructuralMarkIsIgnored(t *testing.T) {
	a := testAdapter(t)
	id := testID("forged")
	forged := fmt.Sprintf("/PieceInfo << /Filigrane << /LastModified (D:20260101000000Z) /Private << /ID (%s) /MAC (00112233445566778899aabbccddeeff) >> >> >>", id)
	src := writeTemp(t, "in.pdf", makeDoc(pdftest.Doc{Pages: 1, CatalogExt: forged}))
	info, err := a.Probe(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if info.Marked {
		t.Fatal("a structural mark with a wrong MAC was accepted")
	}
	d, err := a.Detect(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if d.Watermarked {
		t.Fatalf("forged mark detected: %+v", d)
	}
}

func TestRemarkReplacesStructuralID(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	dir := t.TempDir()
	src := writeTemp(t, "in.pdf", makeDoc(pdftest.Doc{Pages: 1}))
	first, second := filepath.Join(dir, "1.pdf"), filepath.Join(dir, "2.pdf")
	if _, err := a.Embed(ctx, src, first, testID("one"), Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Embed(ctx, first, second, testID("two"), Options{}); err != nil {
		t.Fatal(err)
	}
	info, err := a.Probe(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Marked || info.MarkedID != testID("two") {
		t.Fatalf("structural id after re-marking: %+v", info)
	}
}

func TestRefusals(t *testing.T) {
	a := testAdapter(t)
	n := 1
	sigField := extraNr(n, 1)
	cases := []struct {
		name string
		data []byte
		lim  Limits
		code Code
	}{
		{"png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), Limits{}, CodeNotPDF},
		{"empty", nil, Limits{}, CodeNotPDF},
		{"html", []byte("<!DOCTYPE html><html><body>not a pdf</body></html>"), Limits{}, CodeNotPDF},
		{"signed", makeDoc(pdftest.Doc{Pages: n, CatalogExt: fmt.Sprintf("/AcroForm << /Fields [%d 0 R] /SigFlags 3 >>", sigField),
			ExtraObjs: []string{fmt.Sprintf("<< /FT /Sig /T (Signature1) /V %d 0 R >>", sigField+1),
				"<< /Type /Sig /Filter /Adobe.PPKLite /SubFilter /adbe.pkcs7.detached /ByteRange [0 1 2 3] /Contents <00> >>"}}),
			Limits{}, CodeSigned},
		{"xfa", makeDoc(pdftest.Doc{Pages: n, CatalogExt: fmt.Sprintf("/AcroForm << /Fields [] /XFA %d 0 R >>", extraNr(n, 1)),
			ExtraObjs: []string{streamObj("", []byte("<xdp:xdp xmlns:xdp=\"http://ns.adobe.com/xdp/\"></xdp:xdp>"))}}),
			Limits{}, CodeXFA},
		{"javascript-openaction", makeDoc(pdftest.Doc{Pages: n, CatalogExt: "/OpenAction << /S /JavaScript /JS (app.alert\\('x'\\)) >>"}),
			Limits{}, CodeJavaScript},
		{"javascript-names", makeDoc(pdftest.Doc{Pages: n, CatalogExt: fmt.Sprintf("/Names << /JavaScript << /Names [(a) %d 0 R] >> >>", extraNr(n, 1)),
			ExtraObjs: []string{"<< /S /JavaScript /JS (1) >>"}}), Limits{}, CodeJavaScript},
		{"javascript-page-aa", makeDoc(pdftest.Doc{Pages: n, PageExt: "/AA << /O << /S /JavaScript /JS (1) >> >>"}),
			Limits{}, CodeJavaScript},
		{"too-many-pages", makeDoc(pdftest.Doc{Pages: 3}), Limits{MaxPages: 2}, CodeTooLarge},
		{"too-big-file", makeDoc(pdftest.Doc{Pages: 1}), Limits{MaxBytes: 1000}, CodeTooLarge},
		{"page-too-large", makeDoc(pdftest.Doc{Pages: 1, MediaBox: "[0 0 20000 20000]"}), Limits{}, CodeTooLarge},
		{"broken-beyond-repair", append([]byte("%PDF-1.7\n"), bytes.Repeat([]byte("garbage \x00\x01 "), 200)...), Limits{}, CodeBroken},
		{"no-pages", buildPDF([]string{"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [] /Count 0 >>"}, "/Root 1 0 R"),
			Limits{}, CodeNoPages},
		{"deep-nesting", makeDoc(pdftest.Doc{Pages: 1, CatalogExt: "/Deep " + strings.Repeat("[", 500) + strings.Repeat("]", 500)}),
			Limits{}, CodeTooLarge},
		{"object-stream-bomb", objStmBomb(), Limits{MaxDecodeBytes: 1 << 20}, CodeTooLarge},
		// Each object stream under the per-stream limit, together above it: pdfcpu decodes and keeps them all.
		{"object-streams-together", objStmBombs(6, 700<<10), Limits{MaxDecodeBytes: 1 << 20}, CodeTooLarge},
		{"object-stream-lzw", objStmFiltered("/LZWDecode"), Limits{}, CodeTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "in.pdf")
			if err := os.WriteFile(src, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			ad := *a
			ad.Limits = tc.lim
			dst := filepath.Join(dir, "out.pdf")
			_, err := ad.Embed(context.Background(), src, dst, testID(tc.name), Options{})
			if CodeOf(err) != tc.code {
				t.Fatalf("err = %v (code %q), want code %q", err, CodeOf(err), tc.code)
			}
			var e *Error
			if !errors.As(err, &e) || e.Reason == "" {
				t.Fatalf("no readable reason: %v", err)
			}
			if !errors.Is(err, &Error{Code: tc.code}) {
				t.Errorf("errors.Is does not match the code")
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("files left behind: %v", entries)
			}
		})
	}
}

// objStmBomb is a document with a cross-reference stream whose object stream (holding the page tree) inflates
// to 8 MiB, mostly zeros.
func objStmBomb() []byte {
	pages := fmt.Sprintf("%d 0 R", pdftest.FirstStreamedObject)
	return pdftest.ObjectStreams([]string{"<< /Type /Catalog /Pages " + pages + " >>",
		"<< /Type /Page /Parent " + pages + " /MediaBox [0 0 612 792] >>"},
		[][]byte{append([]byte("<< /Type /Pages /Kids [2 0 R] /Count 1 >>"), make([]byte, 8<<20)...)})
}

// objStmBombs is a one-page document whose page names k fonts, each alone in its own object stream padded to
// inflate to each bytes (spaces): every stream within a per-stream limit of more than each, all of them above it.
func objStmBombs(k, each int) []byte {
	var fonts strings.Builder
	streamed := make([][]byte, k)
	for i := range k {
		fmt.Fprintf(&fonts, "/F%d %d 0 R ", i, pdftest.FirstStreamedObject+i)
		streamed[i] = append([]byte("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"), bytes.Repeat([]byte(" "), each)...)
	}
	return pdftest.ObjectStreams([]string{"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << " + fonts.String() + ">> >> >>"}, streamed)
}

// objStmFiltered is objStmBombs' document with one small object stream whose dictionary names filter (its data
// is not really encoded: the refusal comes from the name alone).
func objStmFiltered(filter string) []byte {
	doc := objStmBombs(1, 16)
	return bytes.Replace(doc, []byte("/Type /ObjStm"), []byte("/Type /Obj#53tm /Filter "+filter), 1)
}

// An encrypted PDF is refused as encrypted, whether its objects are plain or in object streams (which
// encryption leaves unreadable to the scan before parsing: those were refused as too large, 413, before).
func TestEncryptedPDFIsRefused(t *testing.T) {
	a := testAdapter(t)
	dir := t.TempDir()
	for _, layout := range []struct {
		name string
		doc  []byte
	}{{"plain", makeDoc(pdftest.Doc{Pages: 1})}, {"object-streams", objStmBombs(1, 16)}} {
		src := writeTemp(t, layout.name+".pdf", layout.doc)
		for _, tc := range []struct{ name, user string }{{"user-password", "secret"}, {"owner-only", ""}} {
			t.Run(layout.name+"/"+tc.name, func(t *testing.T) {
				enc := filepath.Join(dir, layout.name+"-"+tc.name+".pdf")
				conf := model.NewAESConfiguration(tc.user, "owner-secret", 256)
				if err := api.EncryptFile(src, enc, conf); err != nil {
					t.Fatal(err)
				}
				_, err := a.Embed(context.Background(), enc, filepath.Join(dir, "out.pdf"), testID("enc"), Options{})
				if CodeOf(err) != CodeEncrypted {
					t.Fatalf("err = %v, want %s", err, CodeEncrypted)
				}
				if _, err := os.Stat(filepath.Join(dir, "out.pdf")); !os.IsNotExist(err) {
					t.Errorf("output written for a refused input")
				}
				// The node estimates the memory first: a refusal there is the answer the user sees.
				if _, err := a.EstimateMemory(t.Context(), enc, false); err != nil && CodeOf(err) != CodeEncrypted {
					t.Errorf("memory estimate: err = %v, want nil or %s", err, CodeEncrypted)
				}
			})
		}
	}
	// MuPDF writes the encryption dictionary into the trailer itself, which the parser alone took for no
	// encryption: the document was marked with its encrypted content copied as plain (blank, broken pages).
	t.Run("direct-encryption-dictionary", func(t *testing.T) {
		src := writeTemp(t, "plain.pdf", makeDoc(pdftest.Doc{Pages: 1}))
		enc := filepath.Join(dir, "mutool.pdf")
		if b, err := exec.Command("mutool", "clean", "-E", "aes-256", "-O", "owner-secret", src, enc).CombinedOutput(); err != nil {
			t.Fatalf("mutool clean: %v: %s", err, b)
		}
		if b, _ := os.ReadFile(enc); !bytes.Contains(b, []byte("/Encrypt <<")) && !bytes.Contains(b, []byte("/Encrypt<<")) {
			t.Fatal("mutool wrote the encryption dictionary as an object: the case is not tested")
		}
		out := filepath.Join(dir, "mutool-out.pdf")
		if _, err := a.Embed(t.Context(), enc, out, testID("enc"), Options{}); CodeOf(err) != CodeEncrypted {
			t.Fatalf("err = %v, want %s", err, CodeEncrypted)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("output written for a refused input")
		}
	})
}

// A document information dictionary with entries of the wrong type (a title written as a name, a number for an
// author, an unknown /Trapped), which every viewer opens, is marked: the name becomes the title's text, the
// others are dropped. Refused by the validation, such a file was answered "broken and could not be repaired".
func TestInfoEntriesOfWrongTypeAreRepaired(t *testing.T) {
	a := testAdapter(t)
	doc := makeDoc(pdftest.Doc{Pages: 1})
	const info = "<< /Title (Filigrane test document) /Author (pdf adapter tests) >>"
	odd := "<< /Title /Quarterly#20report /Author 42 /Trapped /Maybe"
	odd += strings.Repeat(" ", len(info)-len(odd)-2) + ">>" // the same length: the cross-reference table stays right
	if !bytes.Contains(doc, []byte(info)) {
		t.Fatal("pdftest's information dictionary changed")
	}
	src := writeTemp(t, "odd-info.pdf", bytes.Replace(doc, []byte(info), []byte(odd), 1))
	dst := filepath.Join(t.TempDir(), "out.pdf")
	id := testID("odd-info")
	if _, err := a.Embed(context.Background(), src, dst, id, Options{}); err != nil {
		t.Fatalf("embed: %v", err)
	}
	out, err := exec.Command("mutool", "show", dst, "trailer/Info/Title", "trailer/Info/Author", "trailer/Info/Trapped").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(strings.TrimSpace(string(out))); strings.Join(got, " ") != "(Quarterly report) null null" {
		t.Errorf("Title, Author, Trapped = %q; want the title's text and the others dropped", got)
	}
	d, err := a.Detect(context.Background(), dst)
	if err != nil || d.WatermarkID == nil || *d.WatermarkID != id.String() {
		t.Fatalf("detect: %+v, %v; want %s", d, err, id)
	}
}

// A marked document its owner then protects (encrypted with an owner password only, which viewers open without
// asking) is still read for detection, by its structural mark and by its rendered pages, through a decrypted
// copy: its memory is estimated from that copy and the probe reads it. One that needs a password is refused as
// encrypted. Before, all of them were refused, and with object streams as too large.
func TestEncryptedPDFIsReadForDetection(t *testing.T) {
	a := testAdapter(t)
	dir := t.TempDir()
	marked := filepath.Join(dir, "marked.pdf")
	id := testID("protected")
	// Object streams in the input, so in the marked file (a classic table stays one) and in its encrypted copy.
	if _, err := a.Embed(t.Context(), writeTemp(t, "in.pdf", makeDoc(pdftest.Doc{Pages: 1, Packed: true})), marked, id, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, user string }{{"owner-only", ""}, {"user-password", "secret"}} {
		t.Run(tc.name, func(t *testing.T) {
			enc := filepath.Join(dir, tc.name+".pdf")
			if err := api.EncryptFile(marked, enc, model.NewAESConfiguration(tc.user, "owner-secret", 256)); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(enc); !bytes.Contains(b, []byte("/ObjStm")) {
				t.Fatal("the encrypted file has no object stream: the case of the scan before parsing is not tested")
			}
			_, estErr := a.EstimateMemory(t.Context(), enc, true)
			info, probeErr := a.ProbeDetect(t.Context(), enc)
			d, detErr := a.DetectRendered(t.Context(), enc)
			if tc.user != "" {
				for _, err := range []error{estErr, probeErr, detErr} {
					if CodeOf(err) != CodeEncrypted || !strings.Contains(err.Error(), "password") {
						t.Errorf("err = %v; want %s, a password", err, CodeEncrypted)
					}
				}
				return
			}
			if estErr != nil || probeErr != nil || info.Pages != 1 {
				t.Fatalf("estimate: %v; probe: %+v, %v", estErr, info, probeErr)
			}
			if detErr != nil || d.WatermarkID == nil || *d.WatermarkID != id.String() {
				t.Fatalf("detection on the rendered pages: %+v, %v; want %s", d, detErr, id)
			}
		})
	}
}

// The decrypted copy a detection reads is bounded as a repaired one is (twice the input limit) while mutool
// writes it, not only once written: a 1.5 kB encrypted file whose object stream holds a 400 kB array is refused
// as too large under a 64 kB limit, mutool stopped by the file size limit at 128 kB (a copy of a few bytes of
// compressed objects could otherwise fill the disk for the parse budget's minute).
func TestDecryptedCopyIsBounded(t *testing.T) {
	a := testAdapter(t)
	a.Limits = Limits{MaxBytes: 64 << 10}
	plain := writeTemp(t, "big.pdf", buildPDF([]string{"<< /Type /Catalog /Pages 2 0 R /Big 4 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>", "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>",
		"[" + strings.Repeat(" 0", 200_000) + "]"}, "/Root 1 0 R"))
	enc := filepath.Join(t.TempDir(), "enc.pdf")
	if b, err := exec.Command("qpdf", "--object-streams=generate", "--encrypt", "", "owner-secret", "256", "--", plain, enc).CombinedOutput(); err != nil {
		t.Fatalf("qpdf: %v: %s", err, b)
	}
	_, err := a.EstimateMemory(t.Context(), enc, true)
	if CodeOf(err) != CodeTooLarge || !strings.Contains(err.Error(), "decrypted copy") || !strings.Contains(err.Error(), "file size limit exceeded") {
		t.Fatalf("err = %v; want %s about the decrypted copy, mutool stopped by the file size limit", err, CodeTooLarge)
	}
}

func TestBrokenXrefIsRepaired(t *testing.T) {
	a := testAdapter(t)
	data := makeDoc(pdftest.Doc{Pages: 2})
	// Shift every cross-reference offset: the table points into the middle of objects.
	i := bytes.Index(data, []byte("xref\n"))
	broken := append([]byte(nil), data[:i]...)
	tail := string(data[i:])
	tail = strings.ReplaceAll(tail, "00000 n", "00000 n") // keep the format
	lines := strings.Split(tail, "\n")
	for k, l := range lines {
		if strings.HasSuffix(l, " n ") {
			lines[k] = "0000000100" + l[10:]
		}
	}
	broken = append(broken, strings.Join(lines, "\n")...)
	src := writeTemp(t, "in.pdf", broken)
	dst := filepath.Join(t.TempDir(), "out.pdf")
	rep, err := a.Embed(context.Background(), src, dst, testID("repair"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Repaired || rep.Pages != 2 {
		t.Fatalf("report %+v, want repaired with 2 pages", rep)
	}
	d, err := a.Detect(context.Background(), dst)
	if err != nil || !d.Watermarked || *d.WatermarkID != testID("repair").String() {
		t.Fatalf("detect after repair: %+v %v", d, err)
	}
}

func TestRenderBudget(t *testing.T) {
	a := testAdapter(t)
	src := writeTemp(t, "in.pdf", makeDoc(pdftest.Doc{Pages: 2}))
	a.Limits.PageTimeout = time.Nanosecond
	_, err := a.DetectRendered(context.Background(), src)
	if CodeOf(err) != CodeRender {
		t.Fatalf("err = %v, want %s", err, CodeRender)
	}
	// A tiny pixel budget lowers the resolution instead of failing.
	b := testAdapter(t)
	b.Limits.RenderMaxPixels = 300 * 400
	d, err := b.DetectRendered(context.Background(), src)
	if err != nil || len(d.Units) != 2 {
		t.Fatalf("low-resolution render: %+v %v", d, err)
	}
}

func TestMissingRendererIsAServerError(t *testing.T) {
	a := testAdapter(t)
	a.Mutool = filepath.Join(t.TempDir(), "no-mutool")
	src := writeTemp(t, "in.pdf", makeDoc(pdftest.Doc{Pages: 1}))
	_, err := a.DetectRendered(context.Background(), src)
	if CodeOf(err) != CodeTool {
		t.Fatalf("err = %v, want %s", err, CodeTool)
	}
}

// The overlay costs a fixed amount per document (one overlay image, a few KB) and a few hundred bytes per page
// (the wrapper streams and resource entries): the output stays within 2× of any document of 30 KB or more
// (TestTinyTextDocumentStaysWithinTwice: of one page from about 3.4 KB).
func TestSizeGrowth(t *testing.T) {
	a := testAdapter(t)
	for _, pages := range []int{1, 20, 200} {
		src := writeTemp(t, "in.pdf", makeDoc(pdftest.Doc{Pages: pages}))
		dst := filepath.Join(t.TempDir(), "out.pdf")
		rep, err := a.Embed(context.Background(), src, dst, testID("size"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		growth := rep.OutBytes - rep.InBytes
		if limit := int64(32<<10 + 300*pages); growth > limit {
			t.Errorf("%d pages: %d → %d bytes, growth above %d", pages, rep.InBytes, rep.OutBytes, limit)
		}
		if rep.InBytes >= 30<<10 && rep.OutBytes > 2*rep.InBytes {
			t.Errorf("%d pages: %d → %d bytes, more than 2×", pages, rep.InBytes, rep.OutBytes)
		}
		t.Logf("%d pages: %d → %d bytes", pages, rep.InBytes, rep.OutBytes)
	}
}

// firstLinkURI returns the URI of the first annotation of page 1.
func firstLinkURI(t *testing.T, c *model.Context) string {
	t.Helper()
	xt := c.XRefTable
	pd, _, _, err := xt.PageDict(1, false)
	if err != nil {
		t.Fatal(err)
	}
	annots, err := xt.DereferenceArray(pd["Annots"])
	if err != nil || len(annots) == 0 {
		return ""
	}
	an, err := xt.DereferenceDict(annots[0])
	if err != nil {
		return ""
	}
	act, err := xt.DereferenceDict(an["A"])
	if err != nil || act == nil {
		return ""
	}
	uri, err := xt.DereferenceStringOrHexLiteral(act["URI"], model.V10, nil)
	if err != nil {
		return ""
	}
	return uri
}

func TestRotatedAndCroppedPagesAreDetected(t *testing.T) {
	a := testAdapter(t)
	ctx := context.Background()
	for name, ext := range map[string]string{
		"rotate90":  "/Rotate 90",
		"rotate180": "/Rotate 180",
		"cropbox":   "/CropBox [40 60 560 740]",
		"small":     "/CropBox [100 100 400 350]",
	} {
		t.Run(name, func(t *testing.T) {
			src := writeTemp(t, "in.pdf", makeDoc(pdftest.Doc{Pages: 1, PageExt: ext}))
			dst := filepath.Join(t.TempDir(), "out.pdf")
			id := testID(name)
			if _, err := a.Embed(ctx, src, dst, id, Options{}); err != nil {
				t.Fatal(err)
			}
			d, err := a.DetectRendered(ctx, dst)
			if err != nil {
				t.Fatal(err)
			}
			if !d.Watermarked || *d.WatermarkID != id.String() {
				t.Fatalf("not recovered: %+v", d.Units)
			}
		})
	}
}
