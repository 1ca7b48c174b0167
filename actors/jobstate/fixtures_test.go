package jobstate

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func hex64(c byte) string { return strings.Repeat(string(c), 64) }

func testSpec() Spec {
	return Spec{
		RequestID: "req_" + hex64('a'), OrgID: "org_1", Operation: OperationEmbed, Media: MediaImage,
		Format: "PNG", FrameCount: 1, AcceleratorRequested: AcceleratorCPU, CreditsHeld: 3,
		Input:       Input{BlobKey: "in/req_a", SHA256: hex64('b'), Size: 1234, Filename: "cat.png", ContentType: "image/png"},
		WatermarkID: hex64('c'), IdempotencyKey: "key-12345678",
	}
}

func testOutput() Output {
	return Output{BlobKey: "out/req_a", Size: 2000, SHA256: hex64('d'), ContentType: "image/png",
		Filename: "cat.png", AssetID: "ast_w", SourceAssetID: "ast_s", WatermarkID: hex64('c'), Charge: 1,
		Accelerator: AcceleratorCPU}
}

func detectSpec() Spec {
	s := testSpec()
	s.Operation, s.WatermarkID = OperationDetect, ""
	return s
}

func detectOutput() Output {
	o := testOutput()
	o.AssetID, o.SourceAssetID, o.WatermarkID, o.ContentType = "", "", "", "application/json"
	return o
}

func mustAccept(t testing.TB, s Spec, now time.Time) *Record {
	t.Helper()
	r, err := Accept(s, now)
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	mustValid(t, r)
	return r
}

func mustValid(t testing.TB, r *Record) {
	t.Helper()
	if err := r.Validate(); err != nil {
		t.Fatalf("invariants: %v", err)
	}
}

func mustClaim(t testing.TB, r *Record, worker string, now time.Time, d time.Duration) Lease {
	t.Helper()
	l, err := r.Claim(worker, now, d)
	if err != nil {
		t.Fatalf("claim by %s at %v: %v", worker, now.Sub(t0), err)
	}
	mustValid(t, r)
	return l
}

// unchanged fails the test when r differs from before (a refused or repeated command must change nothing).
func unchanged(t testing.TB, what string, before, r *Record) {
	t.Helper()
	if !reflect.DeepEqual(before, r) {
		t.Fatalf("%s changed the record:\nbefore %+v\nafter  %+v", what, before, r)
	}
}
