package jobstate

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"
	"time"

	"filigrane/actors/assetid"
	"filigrane/persistence"
)

func receiptJSON(t *testing.T, r *Record) map[string]any {
	t.Helper()
	b, err := json.Marshal(r.Receipt())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// specFields are the receipt fields of spec 2.3 that every receipt carries.
var specFields = []string{"accelerator", "accelerator_requested", "asset_id", "attempts", "credits",
	"error_code", "format", "frame_count", "operation", "request_id", "result_expires_at", "result_url",
	"source_asset_id", "status", "status_url", "webhook_id"}

func TestReceiptQueued(t *testing.T) {
	s := testSpec()
	s.AcceleratorRequested, s.CreditsHeld = AcceleratorGPU, 3
	r := mustAccept(t, s, t0)
	m := receiptJSON(t, r)
	if got := keys(m); !reflect.DeepEqual(got, specFields) {
		t.Fatalf("fields %v,\nwant   %v", got, specFields)
	}
	want := map[string]any{
		"request_id": s.RequestID, "status": "queued", "operation": "embed", "format": "PNG",
		"frame_count": 1.0, "credits": 3.0, "attempts": 0.0, "webhook_id": nil, "asset_id": nil,
		"source_asset_id": nil, "status_url": "/watermarks/jobs/" + s.RequestID,
		"result_url": "/watermarks/jobs/" + s.RequestID + "/result", "error_code": nil,
		"result_expires_at": nil, "accelerator_requested": "gpu", "accelerator": nil,
	}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("receipt %v\nwant    %v", m, want)
	}
}

func TestReceiptSucceeded(t *testing.T) {
	s := testSpec()
	s.WebhookID = "wh_" + hex64('1')[:32]
	s.BatchID = "bat_" + hex64('2')[:32]
	s.StorageDestinationID, s.StorageKey = "dst_1", "out/cat.png"
	s.AcceleratorRequested = AcceleratorGPU
	r := mustAccept(t, s, t0)
	l := mustClaim(t, r, "w", claimAt, lease30)
	done := claimAt.Add(1500 * time.Millisecond)
	out := testOutput() // ran on cpu: charged the normal price
	if err := r.Succeed(l.Token, out, done); err != nil {
		t.Fatal(err)
	}
	m := receiptJSON(t, r)
	want := map[string]any{
		"request_id": s.RequestID, "status": "succeeded", "operation": "embed", "format": "PNG",
		"frame_count": 1.0, "credits": 1.0, "attempts": 1.0, "webhook_id": s.WebhookID, "asset_id": "ast_w",
		"source_asset_id": "ast_s", "status_url": "/watermarks/jobs/" + s.RequestID,
		"result_url": "/watermarks/jobs/" + s.RequestID + "/result", "error_code": nil,
		"result_expires_at": "2026-01-02T00:01:01Z", "accelerator_requested": "gpu", "accelerator": "cpu",
		"batch_id": s.BatchID, "storage_destination_id": "dst_1", "storage_key": "out/cat.png",
		// std_ + SHA-256 of the request id: the edge names the delivery before it runs.
		"storage_provider": "s3", "storage_delivery_id": "std_c9fe2a4eae93dc8ace2a2217f1534d18e9c2d881f4bc6b0f24e61e3795497004",
	}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("receipt %v\nwant    %v", m, want)
	}
}

func TestReceiptFailedDetection(t *testing.T) {
	r := mustAccept(t, detectSpec(), t0)
	l := mustClaim(t, r, "w", claimAt, lease30)
	if err := r.Fail(l.Token, "invalid_media", "not a video", false, claimAt); err != nil {
		t.Fatal(err)
	}
	m := receiptJSON(t, r)
	id := r.RequestID
	if m["status"] != "failed" || m["error_code"] != "invalid_media" || m["credits"] != 0.0 ||
		m["operation"] != "detect" || m["status_url"] != "/watermarks/jobs/"+id ||
		m["result_url"] != "/watermarks/jobs/"+id+"/result" || m["result_expires_at"] != nil ||
		m["accelerator"] != nil || m["asset_id"] != nil {
		t.Fatalf("receipt %v", m)
	}
	if got := keys(m); !reflect.DeepEqual(got, specFields) {
		t.Fatalf("fields %v", got)
	}
}

func TestReceiptRetrying(t *testing.T) {
	r := running(t, lease30)
	if err := r.Fail(1, "codec_error", "", true, claimAt); err != nil {
		t.Fatal(err)
	}
	m := receiptJSON(t, r)
	// The attempt's error is history, not the job's error: error_code stays null until the job fails.
	if m["status"] != "retrying" || m["error_code"] != nil || m["attempts"] != 1.0 || m["credits"] != 3.0 {
		t.Fatalf("receipt %v", m)
	}
}

// A job that succeeded before asset ids carried the whole hash recorded the short ids; its receipt shows the
// full ones, the form the asset routes show and the SDKs accept.
func TestReceiptShowsFullAssetIDsOfLegacyOutput(t *testing.T) {
	s := testSpec()
	r := mustAccept(t, s, t0)
	l := mustClaim(t, r, "w", claimAt, lease30)
	marked, source := assetid.For(s.RequestID, assetid.KindWatermarked), assetid.For(s.RequestID, assetid.KindSource)
	out := testOutput()
	out.AssetID, out.SourceAssetID = marked[:assetid.LegacyLen], source[:assetid.LegacyLen]
	if err := r.Succeed(l.Token, out, claimAt.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	m := receiptJSON(t, r)
	if m["asset_id"] != marked || m["source_asset_id"] != source {
		t.Fatalf("receipt asset ids %v %v, want %s %s", m["asset_id"], m["source_asset_id"], marked, source)
	}
}

// TestReceiptEmbedUnits: a succeeded video embed's receipt carries its units (one per second of frames) from
// the stored record; a record stored without units (every other kind, and records written before embeds had
// units) still loads and its receipt has no units field.
func TestReceiptEmbedUnits(t *testing.T) {
	units := []EmbedUnit{{Index: 0, StartTime: 0, EndTime: 1, Frames: 30}, {Index: 1, StartTime: 1, EndTime: 1.5, Frames: 15}}
	enc, err := EncodeEmbedUnits(units)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		units string
		want  any
	}{
		{"video", enc, []any{
			map[string]any{"index": 0.0, "start_time": 0.0, "end_time": 1.0, "frames": 30.0},
			map[string]any{"index": 1.0, "start_time": 1.0, "end_time": 1.5, "frames": 15.0}}},
		{"without units", "", nil},
	} {
		s := testSpec()
		s.Media, s.Format, s.FrameCount = MediaVideo, "MP4", 45
		r := mustAccept(t, s, t0)
		l := mustClaim(t, r, "w", claimAt, lease30)
		out := testOutput()
		out.ContentType, out.Units = "video/mp4", c.units
		if err := r.Succeed(l.Token, out, claimAt.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		b, err := persistence.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var got Record
		if err := persistence.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		m := receiptJSON(t, &got)
		if u, ok := m["units"]; c.want == nil && ok || c.want != nil && !reflect.DeepEqual(u, c.want) {
			t.Fatalf("%s: receipt units %v, want %v", c.name, u, c.want)
		}
	}
	// A detection never carries embed units.
	r := mustAccept(t, detectSpec(), t0)
	l := mustClaim(t, r, "w", claimAt, lease30)
	out := detectOutput()
	out.Units = enc
	if err := r.Succeed(l.Token, out, claimAt); err == nil {
		t.Fatal("a detection output with embed units was accepted")
	}
}
