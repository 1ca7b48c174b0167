package jobstate

import (
	"errors"
	"strings"
	"testing"
)

func TestValidIdempotencyKey(t *testing.T) {
	cases := []struct {
		key  string
		want bool
	}{
		{"abcdefgh", true},
		{"ABC-def_123", true},
		{strings.Repeat("a", 128), true},
		{"abcdefg", false},
		{strings.Repeat("a", 129), false},
		{"", false},
		{"abc defgh", false},
		{"abcdefgh.", false},
		{"abcdefgh/", false},
		{"abcdéfgh", false},
		{"abcdefgh\n", false},
	}
	for _, c := range cases {
		if got := ValidIdempotencyKey(c.key); got != c.want {
			t.Errorf("ValidIdempotencyKey(%q) = %v, want %v", c.key, got, c.want)
		}
	}
}

func baseInput() FingerprintInput {
	return FingerprintInput{Operation: OperationEmbed, Media: MediaImage, FileSHA256: hex64('b'),
		DataDigest: hex64('c'), Accelerator: AcceleratorCPU}
}

func mustFP(t *testing.T, key string, in FingerprintInput) Fingerprint {
	t.Helper()
	fp, err := NewFingerprint(key, in)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// TestFingerprintOptions: changing any one input or option gives another fingerprint; spelling the same
// value differently does not.
func TestFingerprintOptions(t *testing.T) {
	const key = "key-12345678"
	base := mustFP(t, key, baseInput())
	differ := []struct {
		name string
		edit func(*FingerprintInput)
	}{
		{"operation", func(in *FingerprintInput) { in.Operation = OperationDetect }},
		{"media", func(in *FingerprintInput) { in.Media = MediaDocument }},
		{"file", func(in *FingerprintInput) { in.FileSHA256 = hex64('e') }},
		{"data", func(in *FingerprintInput) { in.DataDigest = hex64('e') }},
		{"no data", func(in *FingerprintInput) { in.DataDigest = "" }},
		{"accelerator", func(in *FingerprintInput) { in.Accelerator = AcceleratorGPU }},
		{"webhook", func(in *FingerprintInput) { in.WebhookID = "wh_" + hex64('1')[:32] }},
		{"storage destination", func(in *FingerprintInput) { in.StorageDestinationID = "dst_1" }},
		{"storage key", func(in *FingerprintInput) { in.StorageKey = "a.png" }},
		{"extra option", func(in *FingerprintInput) { in.Extra = map[string]string{"psnr": "40"} }},
		{"extra option empty value", func(in *FingerprintInput) { in.Extra = map[string]string{"psnr": ""} }},
		// Length prefixes keep neighbouring fields apart.
		{"shifted fields", func(in *FingerprintInput) {
			in.StorageDestinationID, in.StorageKey = "ab", ""
		}},
	}
	seen := map[string]string{base.Hash: "base"}
	for _, c := range differ {
		in := baseInput()
		c.edit(&in)
		fp := mustFP(t, key, in)
		if base.Matches(fp) {
			t.Errorf("%s: fingerprint unchanged", c.name)
		}
		if prev, ok := seen[fp.Hash]; ok {
			t.Errorf("%s: same hash as %s", c.name, prev)
		}
		seen[fp.Hash] = c.name
	}
	in := baseInput()
	in.StorageDestinationID, in.StorageKey = "a", "b"
	in2 := baseInput()
	in2.StorageDestinationID, in2.StorageKey = "ab", ""
	if mustFP(t, key, in).Matches(mustFP(t, key, in2)) {
		t.Error("field boundaries are ambiguous")
	}

	same := []struct {
		name string
		edit func(*FingerprintInput)
	}{
		{"default accelerator", func(in *FingerprintInput) { in.Accelerator = "" }},
		{"uppercase digests", func(in *FingerprintInput) {
			in.FileSHA256, in.DataDigest = strings.ToUpper(in.FileSHA256), strings.ToUpper(in.DataDigest)
		}},
		{"empty extra map", func(in *FingerprintInput) { in.Extra = map[string]string{} }},
	}
	for _, c := range same {
		in := baseInput()
		c.edit(&in)
		if !base.Matches(mustFP(t, key, in)) {
			t.Errorf("%s: fingerprint changed", c.name)
		}
	}
	// Extra options are order-independent.
	a, b := baseInput(), baseInput()
	a.Extra = map[string]string{"x": "1", "y": "2"}
	b.Extra = map[string]string{"y": "2", "x": "1"}
	if !mustFP(t, key, a).Matches(mustFP(t, key, b)) {
		t.Error("extra options depend on map order")
	}
	if mustFP(t, key, baseInput()).Matches(mustFP(t, "key-87654321", baseInput())) {
		t.Error("another key matched")
	}
	if _, err := NewFingerprint("bad key", baseInput()); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid key: %v", err)
	}
	if (Fingerprint{}).Matches(Fingerprint{}) {
		t.Error("two requests without a key matched")
	}
}

func TestCheckReplay(t *testing.T) {
	s := testSpec()
	r := mustAccept(t, s, t0)
	fp, err := s.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CheckReplay(fp); err != nil {
		t.Fatalf("same request: %v", err)
	}
	s2 := s
	s2.AcceleratorRequested = AcceleratorGPU
	fp2, _ := s2.Fingerprint()
	if err := r.CheckReplay(fp2); !errors.Is(err, ErrIdempotencyConflict) {
		t.Fatalf("other accelerator: %v", err)
	}
	s3 := s
	s3.IdempotencyKey = "another-key"
	fp3, _ := s3.Fingerprint()
	if err := r.CheckReplay(fp3); !errors.Is(err, ErrIdempotencyConflict) {
		t.Fatalf("other key: %v", err)
	}
	s4 := s
	s4.IdempotencyKey = ""
	r4 := mustAccept(t, s4, t0)
	if err := r4.CheckReplay(fp); !errors.Is(err, ErrIdempotencyConflict) {
		t.Fatalf("job without a key: %v", err)
	}
	// The fingerprint does not depend on where the file is stored or how it is named.
	s5 := s
	s5.Input.BlobKey, s5.Input.Filename = "uploads/upl_1", "other.png"
	fp5, _ := s5.Fingerprint()
	if err := r.CheckReplay(fp5); err != nil {
		t.Fatalf("same file from an upload: %v", err)
	}
}

func TestIsRedelivery(t *testing.T) {
	s := testSpec()
	s.IdempotencyKey = ""
	s.AcceleratorRequested = ""
	r := mustAccept(t, s, t0)
	if !r.IsRedelivery(s) {
		t.Fatal("the same keyless submission is not recognised as a redelivery")
	}
	other := s
	other.Input.SHA256 = strings.Repeat("9", 64)
	gpu := s
	gpu.AcceleratorRequested = AcceleratorGPU
	keyed := s
	keyed.IdempotencyKey = "k-1"
	org := s
	org.OrgID = "org_" + strings.Repeat("7", 32)
	for name, c := range map[string]Spec{"other file": other, "other accelerator": gpu, "with a key": keyed, "other org": org} {
		if r.IsRedelivery(c) {
			t.Errorf("%s: taken for a redelivery", name)
		}
	}
	withKey := mustAccept(t, testSpec(), t0)
	if withKey.IsRedelivery(s) {
		t.Error("a job created with a key took a keyless submission for a redelivery")
	}
}
