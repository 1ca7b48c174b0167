package codec

import (
	"image"
	"reflect"
	"testing"
)

// TestProbeDetectIsDetect: the probe's detection is Detect's, on a marked image, a rotated copy (refinement at
// work: lattice estimation, then two passes) and an unmarked one, and what it records is what refinement and
// decoding used: the marked image's first decode is the one that read the id, and ProbeNominal records, without
// searching, the marked image's first block scoring and decode (at the nominal geometry).
func TestProbeDetectIsDetect(t *testing.T) {
	c := testCodec(t)
	img := naturalImage(800, 640, 11)
	id, _ := IDFromJSON([]byte(`{"probe":1}`))
	marked, _, err := c.Embed(img, id, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		img    image.Image
		marked bool
	}{
		{"marked", marked, true},
		{"rotated-3deg", attackRotate(marked, 3), true},
		{"unmarked", img, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := c.Detect(tc.img)
			got, pr := c.ProbeDetect(tc.img)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("ProbeDetect %+v, Detect %+v", got, want)
			}
			if got.Watermarked != tc.marked {
				t.Fatalf("watermarked %v, want %v", got.Watermarked, tc.marked)
			}
			if len(pr.Blocks) == 0 || len(pr.Decodes) == 0 {
				t.Fatalf("%d block scorings and %d decodes recorded", len(pr.Blocks), len(pr.Decodes))
			}
			if tc.marked {
				last := pr.Decodes[len(pr.Decodes)-1]
				if r := decodeSoft(last.LLR); !r.ok || r.id != id || !reflect.DeepEqual(r.infoLLR, last.Info) {
					t.Fatalf("the last recorded decode does not give the id")
				}
				b := pr.Blocks[0]
				if b.Plan.W*b.Plan.H != len(b.Val) || len(b.Scores)%(2+(2*b.Radius+1)*(2*b.Radius+1)) != 0 {
					t.Fatalf("block scores probe of a %dx%d plan holds %d waxels and %d scores", b.Plan.W, b.Plan.H,
						len(b.Val), len(b.Scores))
				}
			}
			if tc.name == "marked" {
				// Without the search, at the nominal geometry (which is the unattacked image's): one block scoring
				// at radius 2 of a grid that holds the mark, and the soft word there, which reads the id.
				nom := c.ProbeNominal(tc.img)
				if len(nom.Blocks) != 1 || len(nom.Decodes) != 1 || nom.Blocks[0].Radius != 2 {
					t.Fatalf("ProbeNominal recorded %d block scorings and %d decodes", len(nom.Blocks), len(nom.Decodes))
				}
				if r := decodeSoft(nom.Decodes[0].LLR); !r.ok || r.id != id || !reflect.DeepEqual(r.infoLLR, nom.Decodes[0].Info) {
					t.Fatalf("ProbeNominal's soft word does not read the id")
				}
				b := nom.Blocks[0]
				if want := c.BlockScoresReference(b.Plan, b.Val, b.OK, 2); !reflect.DeepEqual(b.Scores, want) {
					t.Fatalf("ProbeNominal's block scores are not its grid's")
				}
			}
			// Every fold and refinement grid is recorded, with the pyramid it sampled.
			if len(pr.Grids) < len(pr.Blocks) {
				t.Fatalf("%d grids recorded for %d block scorings", len(pr.Grids), len(pr.Blocks))
			}
			for _, g := range pr.Grids {
				p := g.Plan
				if l := pr.Pyramid[p.Level]; len(l.Pix) != l.W*l.H || len(g.Val) != p.W*p.H || len(g.OK) != p.W*p.H ||
					len(g.Acc) != p.TileSide*p.TileSide {
					t.Fatalf("grid probe of a %dx%d plan holds %d waxels and %d sums", p.W, p.H, len(g.Val), len(g.Acc))
				}
			}
			t.Logf("%d grids, %d block scorings, %d decodes", len(pr.Grids), len(pr.Blocks), len(pr.Decodes))
		})
	}
}
