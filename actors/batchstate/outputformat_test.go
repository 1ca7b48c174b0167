package batchstate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	"filigrane/actors/jobstate"
	"filigrane/persistence"
)

// Pinned from the build before output_format (spec(3) and its new record at t0): a PNG batch must fingerprint
// and store exactly as before, so that records written then keep matching the replays of their requests.
const (
	pngBatchFingerprint = "8d8f3d30784f32cfe03786f3c834d541c5747a8c5f5d6684a75d2d5dfec89325"
	pngBatchRecordSHA   = "4b104557bb87ef43f7dc6ead70256526df0e1eda98549fc6ca3fb546ae5012fd"
)

func withFormat(f jobstate.OutputFormat) Spec {
	s := spec(3)
	s.OutputFormat = f
	return s
}

func TestOutputFormatFingerprint(t *testing.T) {
	for _, f := range []jobstate.OutputFormat{"", jobstate.OutputPNG} {
		fp, err := withFormat(f).Fingerprint()
		if err != nil || fp.Hash != pngBatchFingerprint {
			t.Errorf("format %q: fingerprint %s, %v; want the pre-option %s", f, fp.Hash, err, pngBatchFingerprint)
		}
	}
	jpeg, _ := withFormat(jobstate.OutputJPEG).Fingerprint()
	webp, _ := withFormat(jobstate.OutputWebP).Fingerprint()
	if jpeg.Hash == pngBatchFingerprint || webp.Hash == pngBatchFingerprint || jpeg == webp {
		t.Fatalf("formats share a fingerprint: jpeg %s webp %s", jpeg.Hash, webp.Hash)
	}
	// A batch created as JPEG conflicts with the same key sent as PNG (spelled or not) or WebP, and replays
	// as JPEG.
	r := mustNew(t, withFormat(jobstate.OutputJPEG))
	if err := r.CheckReplay(jpeg); err != nil {
		t.Fatalf("same format: %v", err)
	}
	for _, f := range []jobstate.OutputFormat{"", jobstate.OutputPNG, jobstate.OutputWebP} {
		fp, _ := withFormat(f).Fingerprint()
		if err := r.CheckReplay(fp); !errors.Is(err, ErrIdempotencyConflict) {
			t.Errorf("replay as %q: %v, want a conflict", f, err)
		}
	}
	// A batch created without the option replays as an explicit png.
	old := mustNew(t, spec(3))
	png, _ := withFormat(jobstate.OutputPNG).Fingerprint()
	if err := old.CheckReplay(png); err != nil {
		t.Fatalf("png replay of a batch without the option: %v", err)
	}
}

func TestOutputFormatRecord(t *testing.T) {
	a, err := persistence.Marshal(mustNew(t, withFormat(jobstate.OutputPNG)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := persistence.Marshal(mustNew(t, spec(3)))
	sum := sha256.Sum256(b)
	if !bytes.Equal(a, b) || hex.EncodeToString(sum[:]) != pngBatchRecordSHA || bytes.Contains(a, []byte("output_format")) {
		t.Fatal("a PNG batch's record differs from the one written before the option")
	}
	var old Record
	if err := persistence.Unmarshal(b, &old); err != nil {
		t.Fatal(err)
	}
	if old.OutputFormat.OrPNG() != jobstate.OutputPNG || old.Summary(t0)["output_format"] != jobstate.OutputPNG {
		t.Fatalf("a record without the field reads as %q", old.OutputFormat)
	}
	w, _ := persistence.Marshal(mustNew(t, withFormat(jobstate.OutputWebP)))
	var back Record
	if err := persistence.Unmarshal(w, &back); err != nil {
		t.Fatal(err)
	}
	if back.OutputFormat != jobstate.OutputWebP || back.Summary(t0)["output_format"] != jobstate.OutputWebP {
		t.Fatalf("stored webp reads back as %q", back.OutputFormat)
	}
	back.OutputFormat = "gif"
	if err := back.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("record with output format gif: %v", err)
	}
}

func TestNewRefusesAnUnknownOutputFormat(t *testing.T) {
	// The HTTP layer parses the option (jpg, JPEG); the spec carries the canonical name only.
	for _, f := range []jobstate.OutputFormat{"gif", "jpg", "JPEG", "pdf"} {
		if _, err := New(withFormat(f), t0); !errors.Is(err, ErrInvalid) {
			t.Errorf("output format %q: %v, want ErrInvalid", f, err)
		}
	}
}
