package pdf

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// rasterJPEG renders every page of src with MuPDF at 150 dpi (RGB), encodes each as JPEG quality 75 and writes a
// new PDF of those images at the pages' sizes: the benchmark's raster150-jpeg75 attack, what "print to image"
// workflows and scanners produce. It returns the path of the new PDF.
func rasterJPEG(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	pattern := filepath.Join(dir, "r%d.png")
	if out, err := exec.CommandContext(t.Context(), "mutool", "draw", "-q", "-r", "150", "-c", "rgb", "-o", pattern, src).CombinedOutput(); err != nil {
		t.Fatalf("mutool draw: %v: %s", err, out)
	}
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>", ""}
	var kids string
	for i := 1; ; i++ {
		f, err := os.Open(fmt.Sprintf(pattern, i))
		if os.IsNotExist(err) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		img, _, err := image.Decode(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 75}); err != nil {
			t.Fatal(err)
		}
		b := img.Bounds()
		w, h := float64(b.Dx())*72/150, float64(b.Dy())*72/150
		n := len(objs) + 1
		kids += fmt.Sprintf("%d 0 R ", n)
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %g %g] /Resources << /XObject << /I %d 0 R >> >> /Contents %d 0 R >>", w, h, n+1, n+2),
			streamObj(fmt.Sprintf("/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /DCTDecode", b.Dx(), b.Dy()), buf.Bytes()),
			streamObj("", []byte(fmt.Sprintf("q %g 0 0 %g 0 0 cm /I Do Q", w, h))))
	}
	objs[1] = fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", kids, (len(objs)-2)/3)
	out := filepath.Join(dir, "raster.pdf")
	if err := os.WriteFile(out, buildPDF(objs, "/Root 1 0 R"), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}
