package jobstate

import (
	"bytes"
	"errors"
	"testing"

	"filigrane/persistence"
)

func TestParseOutputFormat(t *testing.T) {
	cases := map[string]OutputFormat{
		"": OutputPNG, "png": OutputPNG, "PNG": OutputPNG, "jpeg": OutputJPEG, "jpg": OutputJPEG, "JPG": OutputJPEG,
		"JPEG": OutputJPEG, "webp": OutputWebP, "WebP": OutputWebP,
	}
	for in, want := range cases {
		if got, err := ParseOutputFormat(in); err != nil || got != want {
			t.Errorf("ParseOutputFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"gif", "tiff", "pdf", " png", "jpeg2000", "image/png"} {
		if _, err := ParseOutputFormat(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseOutputFormat(%q): %v, want ErrInvalid", in, err)
		}
	}
}

// pngFingerprint is the hash of baseInput under key-12345678 as builds before output_format computed it: a
// record written then must still match the replay of its request.
const pngFingerprint = "ba41a2b4475b22f0d4d15cdf587f0451f1ea1506aa4d600d7c5f2cda285f3888"

// TestFingerprintOutputFormat: the output format is part of the request (another format is another request),
// and PNG, spelled or not, fingerprints as before the option existed.
func TestFingerprintOutputFormat(t *testing.T) {
	const key = "key-12345678"
	png := baseInput()
	png.OutputFormat = OutputPNG
	for _, in := range []FingerprintInput{baseInput(), png} {
		if fp := mustFP(t, key, in); fp.Hash != pngFingerprint {
			t.Errorf("PNG fingerprint %s, want the old %s", fp.Hash, pngFingerprint)
		}
	}
	jpeg, webp := baseInput(), baseInput()
	jpeg.OutputFormat, webp.OutputFormat = OutputJPEG, OutputWebP
	fj, fw := mustFP(t, key, jpeg), mustFP(t, key, webp)
	if fj.Hash == pngFingerprint || fw.Hash == pngFingerprint || fj == fw {
		t.Errorf("formats share a fingerprint: png %s jpeg %s webp %s", pngFingerprint, fj.Hash, fw.Hash)
	}
	// The format does not replace the other extra options.
	withExtra := jpeg
	withExtra.Extra = map[string]string{"psnr": "40"}
	if mustFP(t, key, withExtra) == fj {
		t.Error("an extra option is lost beside the output format")
	}
	if len(withExtra.Extra) != 1 {
		t.Errorf("fingerprinting changed the caller's extra options: %v", withExtra.Extra)
	}
}

func TestReplayOtherOutputFormat(t *testing.T) {
	s := testSpec()
	s.OutputFormat = OutputJPEG
	r := mustAccept(t, s, t0)
	if r.OutputFormat != OutputJPEG || r.OutputFormat.OrPNG() != OutputJPEG {
		t.Fatalf("record output format %q", r.OutputFormat)
	}
	same, _ := s.Fingerprint()
	if err := r.CheckReplay(same); err != nil {
		t.Fatalf("same format: %v", err)
	}
	for _, f := range []OutputFormat{"", OutputPNG, OutputWebP} {
		other := s
		other.OutputFormat = f
		fp, _ := other.Fingerprint()
		if err := r.CheckReplay(fp); !errors.Is(err, ErrIdempotencyConflict) {
			t.Errorf("replay as %q: %v, want a conflict", f, err)
		}
	}
	// A job accepted without the option replays as an explicit png.
	old := mustAccept(t, testSpec(), t0)
	png := testSpec()
	png.OutputFormat = OutputPNG
	fp, _ := png.Fingerprint()
	if err := old.CheckReplay(fp); err != nil {
		t.Fatalf("png replay of a job without the option: %v", err)
	}
	// A keyless redelivery is only one with the same format.
	keyless := s
	keyless.IdempotencyKey = ""
	kr := mustAccept(t, keyless, t0)
	if !kr.IsRedelivery(keyless) {
		t.Error("the same keyless jpeg submission is not a redelivery")
	}
	keyless.OutputFormat = OutputWebP
	if kr.IsRedelivery(keyless) {
		t.Error("a webp submission was taken for the redelivery of a jpeg one")
	}
}

// TestOutputFormatRecord: a PNG request's record is stored byte for byte as before the option (no
// output_format key), so records of older builds and newer ones read alike; JPEG is stored and read back.
func TestOutputFormatRecord(t *testing.T) {
	png := testSpec()
	png.OutputFormat = OutputPNG
	a, b := mustMarshal(t, mustAccept(t, png, t0)), mustMarshal(t, mustAccept(t, testSpec(), t0))
	if !bytes.Equal(a, b) || bytes.Contains(a, []byte("output_format")) {
		t.Fatal("a PNG record differs from one written without the option")
	}
	var old Record
	if err := persistence.Unmarshal(b, &old); err != nil {
		t.Fatal(err)
	}
	if old.OutputFormat.OrPNG() != OutputPNG {
		t.Fatalf("a record without the field reads as %q", old.OutputFormat.OrPNG())
	}
	jpeg := testSpec()
	jpeg.OutputFormat = OutputJPEG
	var got Record
	if err := persistence.Unmarshal(mustMarshal(t, mustAccept(t, jpeg, t0)), &got); err != nil {
		t.Fatal(err)
	}
	if got.OutputFormat != OutputJPEG {
		t.Fatalf("stored jpeg reads back as %q", got.OutputFormat)
	}
	got.OutputFormat = "gif"
	if err := got.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("record with output format gif: %v", err)
	}
}

func TestAcceptOutputFormat(t *testing.T) {
	bad := map[string]func(*Spec){
		"unknown":         func(s *Spec) { s.OutputFormat = "gif" },
		"not canonical":   func(s *Spec) { s.OutputFormat = "jpg" },
		"upper case":      func(s *Spec) { s.OutputFormat = "JPEG" },
		"on a document":   func(s *Spec) { s.Media, s.OutputFormat = MediaDocument, OutputJPEG },
		"on a detection":  func(s *Spec) { s.Operation, s.WatermarkID, s.OutputFormat = OperationDetect, "", OutputWebP },
		"webp on a video": func(s *Spec) { s.Media, s.OutputFormat = MediaVideo, OutputWebP },
	}
	for name, edit := range bad {
		s := testSpec()
		edit(&s)
		if _, err := Accept(s, t0); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	doc := testSpec()
	doc.Media, doc.OutputFormat = MediaDocument, OutputPNG // the default is no choice
	mustAccept(t, doc, t0)
}
