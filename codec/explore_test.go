package codec

import (
	"fmt"
	"image"
	_ "image/jpeg"
	_ "image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	xdraw "golang.org/x/image/draw"
)

type namedAttack struct {
	name string
	f    func(image.Image, *rand.Rand) image.Image
}

func robustnessAttacks() []namedAttack {
	return []namedAttack{
		{"clean", func(i image.Image, _ *rand.Rand) image.Image { return i }},
		{"jpeg75", func(i image.Image, _ *rand.Rand) image.Image { return attackJPEG(i, 75) }},
		{"jpeg50", func(i image.Image, _ *rand.Rand) image.Image { return attackJPEG(i, 50) }},
		{"jpeg30", func(i image.Image, _ *rand.Rand) image.Image { return attackJPEG(i, 30) }},
		{"resize0.5", func(i image.Image, _ *rand.Rand) image.Image { return attackResize(i, 0.5) }},
		{"crop0.71", func(i image.Image, r *rand.Rand) image.Image { return attackCrop(i, 0.71, r.Float64(), r.Float64()) }},
		{"rot2", func(i image.Image, _ *rand.Rand) image.Image { return attackRotate(i, 2) }},
		{"flip", func(i image.Image, _ *rand.Rand) image.Image { return attackFlip(i) }},
		{"bright1.3", func(i image.Image, _ *rand.Rand) image.Image { return attackLevels(i, 1.3, 1) }},
		{"bright0.7", func(i image.Image, _ *rand.Rand) image.Image { return attackLevels(i, 0.7, 1) }},
		{"contr1.3", func(i image.Image, _ *rand.Rand) image.Image { return attackLevels(i, 1, 1.3) }},
		{"contr0.7", func(i image.Image, _ *rand.Rand) image.Image { return attackLevels(i, 1, 0.7) }},
		{"resize2", func(i image.Image, _ *rand.Rand) image.Image { return attackResize(i, 2) }},
		{"rot10", func(i image.Image, _ *rand.Rand) image.Image { return attackRotate(i, -10) }},
		{"crop0.55", func(i image.Image, r *rand.Rand) image.Image { return attackCrop(i, 0.55, r.Float64(), r.Float64()) }},
		{"0.5x+jpeg50", func(i image.Image, _ *rand.Rand) image.Image { return attackJPEG(attackResize(i, 0.5), 50) }},
		{"rot5+jpeg60", func(i image.Image, _ *rand.Rand) image.Image { return attackJPEG(attackRotate(i, 5), 60) }},
		{"crop0.71+rot3", func(i image.Image, r *rand.Rand) image.Image {
			return attackRotate(attackCrop(i, 0.71, r.Float64(), r.Float64()), 3)
		}},
		{"0.75x+jpeg70", func(i image.Image, _ *rand.Rand) image.Image { return attackJPEG(attackResize(i, 0.75), 70) }},
		{"crop0.8+1.3x", func(i image.Image, r *rand.Rand) image.Image {
			return attackResize(attackCrop(i, 0.8, r.Float64(), r.Float64()), 1.3)
		}},
		{"rot90", func(i image.Image, _ *rand.Rand) image.Image { return attackRotate90(i) }},
		{"rot90+flip+0.7x", func(i image.Image, _ *rand.Rand) image.Image {
			return attackResize(attackFlip(attackRotate90(i)), 0.7)
		}},
		{"jpeg40+crop+b0.5", func(i image.Image, r *rand.Rand) image.Image {
			return attackJPEG(attackLevels(attackCrop(i, 0.71, r.Float64(), r.Float64()), 0.5, 1), 40)
		}},
	}
}

// TestExplore measures a robustness table (exact-id rate, mean and worst raw coded-bit error rate, mean detect
// time) for tuning, logged with -v, and fails on what must never happen whatever the attack: a detection on
// an unmarked image, or a wrong identifier (read directly or snapped to the wrong registry entry). It runs only with FILIGRANE_EXPLORE=1; FILIGRANE_PHOTOS may name a folder of photos (each is
// upscaled to a 1024-pixel short side when smaller), otherwise procedural images are used.
func TestExplore(t *testing.T) {
	if os.Getenv("FILIGRANE_EXPLORE") == "" {
		t.Skip("set FILIGRANE_EXPLORE=1")
	}
	c, _ := New([]byte("filigrane-development-key-000000"))
	var imgs []image.Image
	if dir := os.Getenv("FILIGRANE_PHOTOS"); dir != "" {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, f := range files {
			fh, err := os.Open(f)
			if err != nil {
				continue
			}
			img, _, err := image.Decode(fh)
			fh.Close()
			if err != nil {
				continue
			}
			b := img.Bounds()
			if s := min(b.Dx(), b.Dy()); s < 1024 && os.Getenv("FILIGRANE_NATIVE") == "" {
				f := 1024.0 / float64(s)
				dst := image.NewNRGBA(image.Rect(0, 0, int(float64(b.Dx())*f), int(float64(b.Dy())*f)))
				xdraw.CatmullRom.Scale(dst, dst.Bounds(), img, b, xdraw.Src, nil)
				img = dst
			}
			if min(img.Bounds().Dx(), img.Bounds().Dy()) >= MinEmbedSide {
				imgs = append(imgs, img)
			}
		}
	} else if os.Getenv("FILIGRANE_BIG") != "" {
		imgs = append(imgs, naturalImage(4000, 3000, 200), naturalImage(3000, 2000, 201))
	} else {
		for i := 0; i < 6; i++ {
			imgs = append(imgs, naturalImage(1024, 1024, uint64(100+i)))
		}
	}
	rng := rand.New(rand.NewPCG(1, 1))
	registry := make([]ID, 1000)
	for i := range registry {
		registry[i][0], registry[i][1], registry[i][2] = 0xee, byte(i), byte(i>>8)
		registry[i][30] = byte(i * 7)
	}
	type stat struct {
		ok, fp, snapped int
		ber, maxBER     float64
		dt              time.Duration
	}
	attacks := robustnessAttacks()
	stats := make([]stat, len(attacks))
	var psnr float64
	for n, img := range imgs {
		var id ID
		id[0], id[31] = byte(n), 0x5a
		var psnrOpt float64
		fmt.Sscan(os.Getenv("FILIGRANE_PSNR"), &psnrOpt)
		marked, rep, err := c.Embed(img, id, EmbedOptions{PSNR: psnrOpt})
		if err != nil {
			t.Fatal(err)
		}
		psnr += rep.PSNR
		coded := convEncode(frameBits(id))
		for k, a := range attacks {
			if only := os.Getenv("FILIGRANE_ATTACK"); only != "" && only != a.name {
				continue
			}
			att := a.f(marked, rng)
			t0 := time.Now()
			at := c.detectAttempt(lumaOf(att))
			stats[k].dt += time.Since(t0)
			d := at.detection()
			if d.Watermarked && *d.WatermarkID == id.String() {
				stats[k].ok++
			} else if d.Watermarked {
				stats[k].fp++
			} else if got, ok := c.Snap(d, append(registry, id)); ok && got == id {
				stats[k].snapped++
			} else if ok {
				stats[k].fp++
			}
			errs := len(coded)
			if at.valid {
				errs = 0
				for i, v := range at.coded {
					if (v > 0) != (coded[i] == 1) {
						errs++
					}
				}
			}
			ber := float64(errs) / float64(len(coded))
			if os.Getenv("FILIGRANE_VERBOSE") != "" {
				t.Logf("  img %d %-18s ber %.3f z %.1f ok %v", n, a.name, ber, at.pilotZ, d.Watermarked)
			}
			stats[k].ber += ber
			stats[k].maxBER = max(stats[k].maxBER, ber)
		}
		if d := c.Detect(img); d.Watermarked {
			t.Errorf("false positive on unmarked image %d", n)
		}
	}
	t.Logf("%d images, mean PSNR %.2f", len(imgs), psnr/float64(len(imgs)))
	for k, a := range attacks {
		s := stats[k]
		n := float64(len(imgs))
		t.Logf("%-18s exact %2d/%d  +snap %d  wrong %d  BER mean %.3f max %.3f  detect %v", a.name, s.ok, len(imgs), s.snapped, s.fp,
			s.ber/n, s.maxBER, (s.dt / time.Duration(len(imgs))).Round(time.Millisecond))
		if s.fp > 0 {
			t.Errorf("%s: %d of %d images read as a wrong identifier", a.name, s.fp, len(imgs))
		}
	}
}
