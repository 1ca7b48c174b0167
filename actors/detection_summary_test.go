package actors_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
	"filigrane/codec"
)

// manyUnits reports a detection of n units (a long PDF or video), unit i watermarked when i is even.
type manyUnits struct {
	copyAdapter
	n int
}

func (a manyUnits) Detect(ctx context.Context, src string) (codec.Detection, error) {
	id := strings.Repeat("d", 64)
	d := codec.Detection{Watermarked: true, Confidence: 0.75, WatermarkID: &id}
	for i := range a.n {
		u := codec.Unit{Index: i, Confidence: 0.1}
		if i%2 == 0 {
			u.Watermarked, u.Confidence, u.WatermarkID = true, 0.9, &id
		}
		d.Units = append(d.Units, u)
	}
	return d, nil
}

var _ mediakind.Adapter = manyUnits{}

// TestDetectionSummaryOnRecord: a detection job's output carries its findings for the webhook event (the
// record's copy, so the event keeps its bytes after the result file expires): watermarked, confidence,
// watermark_id, the first jobstate.MaxSummaryUnits units and units_total; a short result carries every unit.
func TestDetectionSummaryOnRecord(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{3, 250} {
		var seen []string
		m, _ := newFileMedia(t, manyUnits{copyAdapter: copyAdapter{seen: &seen}, n: n})
		if _, err := m.Blobs.Put(ctx, "inputs/clip", strings.NewReader("frames")); err != nil {
			t.Fatal(err)
		}
		out, perr := m.Process(ctx, videoJob(t, jobstate.OperationDetect, "inputs/clip", 6))
		if perr != nil {
			t.Fatal(perr)
		}
		var got struct {
			Watermarked bool         `json:"watermarked"`
			Confidence  float64      `json:"confidence"`
			WatermarkID *string      `json:"watermark_id"`
			Units       []codec.Unit `json:"units"`
			UnitsTotal  int          `json:"units_total"`
		}
		if err := json.Unmarshal([]byte(out.Detection), &got); err != nil {
			t.Fatalf("%d units: summary %q: %v", n, out.Detection, err)
		}
		want := min(n, jobstate.MaxSummaryUnits)
		if !got.Watermarked || got.Confidence != 0.75 || got.WatermarkID == nil || *got.WatermarkID != strings.Repeat("d", 64) ||
			got.UnitsTotal != n || len(got.Units) != want {
			t.Fatalf("%d units: summary %s", n, out.Detection)
		}
		for i, u := range got.Units {
			if u.Index != i || u.Watermarked != (i%2 == 0) || (u.WatermarkID == nil) == u.Watermarked {
				t.Fatalf("%d units: unit %d is %+v", n, i, u)
			}
		}
		if len(out.Detection) > jobstate.MaxDetectionSummary {
			t.Fatalf("summary of %d bytes", len(out.Detection))
		}
	}
}
