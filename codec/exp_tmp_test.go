package codec

import (
	"fmt"
	"image"
	_ "image/png"
	"os"
	"strings"
	"testing"
)

func TestExpFlat(t *testing.T) {
	files := os.Getenv("EXP_FILES")
	if files == "" {
		t.Skip()
	}
	c := testCodec(t)
	id, _ := IDFromJSON([]byte(`{"exp":1}`))
	coded := convEncode(frameBits(id))
	ber := func(llr []float64) float64 {
		if llr == nil {
			return 1
		}
		e := 0
		for i, v := range llr {
			if (v > 0) != (coded[i] == 1) {
				e++
			}
		}
		return float64(e) / float64(len(coded))
	}
	for _, f := range strings.Split(files, ",") {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		img, _, err := image.Decode(fh)
		fh.Close()
		if err != nil {
			t.Fatal(err)
		}
		m, _, err := c.Embed(img, id, EmbedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []int{50, 30} {
			a := attackJPEG(m, q)
			y := lumaOf(a)
			pyr := buildPyramid(y, 16)
			fine := c.tryGeometry(pyr, nominalAffine(y.w, y.h))
			co := c.tryGeometry(pyr, scaledAffine(coarseFactor*waxelSize(y.w, y.h)))
			var sum []float64
			if fine.valid && co.valid {
				sum = make([]float64, len(fine.coded))
				for i := range sum {
					sum[i] = fine.coded[i] + co.coded[i]
				}
			}
			d := c.Detect(a)
			t.Log(fmt.Sprintf("%-40s q%d fine z %.1f ber %.3f | coarse z %.1f ber %.3f | sum ber %.3f | ok %v", f[len(f)-min(40, len(f)):], q,
				fine.pilotZ, ber(fine.coded), co.pilotZ, ber(co.coded), ber(sum), d.Watermarked))
		}
	}
}
