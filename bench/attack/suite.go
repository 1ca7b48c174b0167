package attack

import (
	"image"
	"math/rand/v2"
)

// Attack is one named distortion of the benchmark.
type Attack struct {
	Name   string // stable identifier used in reports, e.g. "jpeg50"
	Group  string // family, e.g. "jpeg", "geometry"
	Detail string // human-readable parameters
	// Apply distorts img; rng gives random offsets and noise so that a run is reproducible from its seed.
	Apply func(img *image.NRGBA, rng *rand.Rand) (*image.NRGBA, error)
}

func pure(f func(*image.NRGBA) *image.NRGBA) func(*image.NRGBA, *rand.Rand) (*image.NRGBA, error) {
	return func(img *image.NRGBA, _ *rand.Rand) (*image.NRGBA, error) { return f(img), nil }
}

func jpegAt(q int) func(*image.NRGBA, *rand.Rand) (*image.NRGBA, error) {
	return func(img *image.NRGBA, _ *rand.Rand) (*image.NRGBA, error) { return JPEG(img, q) }
}

func cropTo(f float64) func(*image.NRGBA, *rand.Rand) (*image.NRGBA, error) {
	return func(img *image.NRGBA, rng *rand.Rand) (*image.NRGBA, error) { return RandomCrop(img, f, rng), nil }
}

// Suite returns the benchmark's attacks (parameters after research/watermark-codec.md section 2h). The order is
// the order of the report. The WebP attack is included only when ffmpeg is installed.
func Suite() []Attack {
	suite := []Attack{
		{"clean", "identity", "no change (the 8-bit marked image, as its lossless PNG would decode)", pure(func(m *image.NRGBA) *image.NRGBA { return m })},
		{"jpeg90", "jpeg", "Go image/jpeg q90, 4:2:0", jpegAt(90)},
		{"jpeg75", "jpeg", "Go image/jpeg q75, 4:2:0", jpegAt(75)},
		{"jpeg50", "jpeg", "Go image/jpeg q50, 4:2:0", jpegAt(50)},
		{"jpeg30", "jpeg", "Go image/jpeg q30, 4:2:0", jpegAt(30)},
		{"resize0.5", "resize", "0.5x per side, bicubic, anti-aliased, left at the new size", pure(func(m *image.NRGBA) *image.NRGBA { return Scale(m, 0.5, Bicubic) })},
		{"resize0.75", "resize", "0.75x per side, bilinear, anti-aliased", pure(func(m *image.NRGBA) *image.NRGBA { return Scale(m, 0.75, Bilinear) })},
		{"resize1.5", "resize", "1.5x per side, bicubic", pure(func(m *image.NRGBA) *image.NRGBA { return Scale(m, 1.5, Bicubic) })},
		{"crop0.9", "crop", "keep 90% of each side at a random offset, not resized back", cropTo(0.9)},
		{"crop0.71", "crop", "keep 71% of each side (half the area) at a random offset", cropTo(0.71)},
		{"crop0.55", "crop", "keep 55% of each side (0.3 of the area) at a random offset", cropTo(0.55)},
		{"crop0.5", "crop", "keep 50% of each side (a quarter of the area) at a random offset", cropTo(0.5)},
		{"rot+2", "rotation", "2° counter-clockwise, same size, black corners, bilinear", pure(func(m *image.NRGBA) *image.NRGBA { return Rotate(m, 2) })},
		{"rot-2", "rotation", "2° clockwise", pure(func(m *image.NRGBA) *image.NRGBA { return Rotate(m, -2) })},
		{"rot+5", "rotation", "5° counter-clockwise", pure(func(m *image.NRGBA) *image.NRGBA { return Rotate(m, 5) })},
		{"rot-5", "rotation", "5° clockwise", pure(func(m *image.NRGBA) *image.NRGBA { return Rotate(m, -5) })},
		{"flip", "geometry", "horizontal mirror", pure(FlipH)},
		{"bright+30", "colour", "brightness x1.3", pure(func(m *image.NRGBA) *image.NRGBA { return Brightness(m, 1.3) })},
		{"bright-30", "colour", "brightness x0.7", pure(func(m *image.NRGBA) *image.NRGBA { return Brightness(m, 0.7) })},
		{"contrast+30", "colour", "contrast x1.3 about the mean gray", pure(func(m *image.NRGBA) *image.NRGBA { return Contrast(m, 1.3) })},
		{"contrast-30", "colour", "contrast x0.7", pure(func(m *image.NRGBA) *image.NRGBA { return Contrast(m, 0.7) })},
		{"gamma0.8", "colour", "gamma 0.8 (brightens mid-tones)", pure(func(m *image.NRGBA) *image.NRGBA { return Gamma(m, 0.8) })},
		{"gamma1.25", "colour", "gamma 1.25 (darkens mid-tones)", pure(func(m *image.NRGBA) *image.NRGBA { return Gamma(m, 1.25) })},
		{"noise0.02", "noise", "Gaussian noise sigma 0.02 (5.1/255) per channel", func(m *image.NRGBA, rng *rand.Rand) (*image.NRGBA, error) { return Noise(m, 0.02*255, rng), nil }},
		{"noise0.04", "noise", "Gaussian noise sigma 0.04 (10.2/255) per channel", func(m *image.NRGBA, rng *rand.Rand) (*image.NRGBA, error) { return Noise(m, 0.04*255, rng), nil }},
		{"blur1", "filter", "Gaussian blur sigma 1 px", pure(func(m *image.NRGBA) *image.NRGBA { return Blur(m, 1) })},
		{"blur2", "filter", "Gaussian blur sigma 2 px", pure(func(m *image.NRGBA) *image.NRGBA { return Blur(m, 2) })},
		{"median3", "filter", "3x3 median", pure(Median3)},
		{"screenshot", "chain", "downscale to 1280 px wide (bilinear), JPEG q85, crop 90% per side at a random offset",
			func(m *image.NRGBA, rng *rand.Rand) (*image.NRGBA, error) {
				if w := m.Bounds().Dx(); w > 1280 {
					m = Resize(m, 1280, max(1, m.Bounds().Dy()*1280/w), Bilinear)
				}
				m, err := JPEG(m, 85)
				if err != nil {
					return nil, err
				}
				return RandomCrop(m, 0.9, rng), nil
			}},
		{"screenshot-small", "chain", "0.5x (bilinear), JPEG q75, crop 80% per side at a random offset",
			func(m *image.NRGBA, rng *rand.Rand) (*image.NRGBA, error) {
				m, err := JPEG(Scale(m, 0.5, Bilinear), 75)
				if err != nil {
					return nil, err
				}
				return RandomCrop(m, 0.8, rng), nil
			}},
		{"crop0.71+bright0.5+jpeg40", "chain", "combined attack: crop 71% per side, brightness x0.5, JPEG q40",
			func(m *image.NRGBA, rng *rand.Rand) (*image.NRGBA, error) {
				return JPEG(Brightness(RandomCrop(m, 0.71, rng), 0.5), 40)
			}},
	}
	if FFmpegAvailable() {
		webp := Attack{"webp75", "lossy", "libwebp (through ffmpeg) quality 75, decoded with x/image/webp",
			func(m *image.NRGBA, _ *rand.Rand) (*image.NRGBA, error) { return WebP(m, 75) }}
		suite = append(suite[:5], append([]Attack{webp}, suite[5:]...)...)
	}
	return suite
}

// Quick is the subset used by quick mode: one attack per family.
func Quick() []Attack {
	keep := map[string]bool{"clean": true, "jpeg50": true, "resize0.5": true, "crop0.71": true, "rot+2": true,
		"bright+30": true, "contrast-30": true, "noise0.04": true, "median3": true, "screenshot": true}
	var out []Attack
	for _, a := range Suite() {
		if keep[a.Name] {
			out = append(out, a)
		}
	}
	return out
}
