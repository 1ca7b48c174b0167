package codec

import (
	"fmt"
	"os"
	"testing"
)

func TestDebugSync(t *testing.T) {
	if os.Getenv("FILIGRANE_EXPLORE") == "" {
		t.Skip()
	}
	c, _ := New([]byte("filigrane-development-key-000000"))
	id, _ := IDFromJSON([]byte(`{"a":1}`))
	img := naturalImage(1024, 1024, 1)
	marked, _, _ := c.Embed(img, id, EmbedOptions{})
	att := attackResize(marked, 0.5)
	y := lumaOf(att)
	pyr := buildPyramid(y, 16)
	for _, a := range latticeCandidates(pyr, 5) {
		g := whiten(sampleGrid(pyr, a))
		acc, _ := fold(g)
		al := c.searchDihedral(acc)
		a2 := al.aligned(a)
		a3 := c.refine(pyr, a2, 2)
		a4 := c.refine(pyr, a3, 1)
		acc4, _ := fold(whiten(sampleGrid(pyr, a4)))
		sw := c.layout.demod(acc4)
		errs := 0
		coded := convEncode(frameBits(id))
		for i, v := range sw.llr {
			if (v > 0) != (coded[i] == 1) {
				errs++
			}
		}
		fmt.Printf("cand waxel %.4f m %v al %+v\n  a2 %v\n  a4 %v z %.1f errs %d\n", a.waxel(), a.m, al, a2, a4, sw.pilotZ, errs)
	}
}
