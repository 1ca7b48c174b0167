package codecbench

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// TargetClass is the photo class the targets apply to; ArtClass is the smooth-artwork class, which has the same
// targets and its own tables.
const (
	TargetClass = "photo>=1MP"
	ArtClass    = "art>=1MP"
)

// TargetCheck compares one measurement with the target.
type TargetCheck struct {
	Class    string `json:"class,omitempty"`
	Name     string `json:"name"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Pass     bool   `json:"pass"`
	Skipped  bool   `json:"skipped,omitempty"` // the run did not include what the target needs
}

func check(name, target, measured string, pass bool) TargetCheck {
	return TargetCheck{Name: name, Target: target, Measured: measured, Pass: pass}
}

// CheckTargets compares the run with the targets of issue 11 (invisibility and robustness, for photos and art
// alike) and stores the verdicts in r.Targets.
func (r *Report) CheckTargets() {
	r.Targets = nil
	for _, class := range []string{TargetClass, ArtClass} {
		r.checkClass(class)
	}
	minPSNR := math.Inf(1)
	for _, im := range r.Images {
		if im.Error == "" && (im.Class == TargetClass || im.Class == ArtClass) {
			minPSNR = math.Min(minPSNR, im.PSNR)
		}
	}
	if !math.IsInf(minPSNR, 1) {
		r.Targets = append(r.Targets, check("PSNR of every marked image", ">= 38 dB", fmt.Sprintf("min %.2f dB", minPSNR), minPSNR >= 38))
	}
	wrong := 0
	for _, a := range r.Attacks {
		wrong += a.WrongIDs
	}
	fp := r.FalsePositives
	r.Targets = append(r.Targets, check("no false positive", ">= 2000 unmarked probes, 0 watermarked, 0 wrong ids",
		fmt.Sprintf("%d of %d probes, %d wrong ids under attack", fp.Watermarked, fp.Probes, wrong),
		fp.Watermarked == 0 && wrong == 0 && fp.Probes >= 2000))
	for _, s := range r.Speed {
		switch s.Label {
		case "1 MP":
			r.Targets = append(r.Targets,
				check("1 MP embed", "<= 150 ms", fmt.Sprintf("%.0f ms", s.EmbedMs), s.EmbedMs <= 150),
				check("1 MP detect", "<= 250 ms", fmt.Sprintf("%.0f ms", s.DetectMs), s.DetectMs <= 250))
		case "12 MP":
			r.Targets = append(r.Targets,
				check("12 MP embed", "<= 1.5 s", fmt.Sprintf("%.2f s", s.EmbedMs/1000), s.EmbedMs <= 1500),
				check("12 MP detect (research goal)", "<= 1 s", fmt.Sprintf("%.2f s", s.DetectMs/1000), s.DetectMs <= 1000))
		}
	}
	for _, m := range r.Memory {
		big := m.Megapixels > 20
		switch {
		case m.Op == "embed" && big:
			r.Targets = append(r.Targets, check(fmt.Sprintf("%.0f MP embed peak memory (RSS)", m.Megapixels), "< 1 GB",
				fmt.Sprintf("%.0f MiB", mib(m.PeakRSSBytes)), m.PeakRSSBytes > 0 && m.PeakRSSBytes < 1e9))
		case strings.HasPrefix(m.Op, "e2e"):
			limit, limitText := int64(1e9), "<= 1 GB"
			if !big {
				limit, limitText = 250e6, "<= 250 MB"
			}
			r.Targets = append(r.Targets, check(fmt.Sprintf("%.0f MP JPEG -> %s end to end, peak memory (RSS)", m.Megapixels,
				strings.ToUpper(strings.TrimPrefix(m.Op, "e2e-"))), limitText, fmt.Sprintf("%.0f MiB", mib(m.PeakRSSBytes)),
				m.PeakRSSBytes > 0 && m.PeakRSSBytes <= limit))
			if !big {
				lim := 1200.0
				if m.Op == "e2e-png" {
					lim = 1500
				}
				r.Targets = append(r.Targets, check(fmt.Sprintf("%.0f MP JPEG -> %s end to end, one core", m.Megapixels,
					strings.ToUpper(strings.TrimPrefix(m.Op, "e2e-"))), fmt.Sprintf("<= %.1f s", lim/1000),
					fmt.Sprintf("%.2f s", m.Ms/1000), m.Ms <= lim))
			}
		}
	}
}

// checkClass adds the invisibility and robustness targets of one class.
func (r *Report) checkClass(class string) {
	add := func(t TargetCheck) {
		t.Class = class
		r.Targets = append(r.Targets, t)
	}
	var b3, bmax []float64
	below, flatWorst := 0, 0.0
	n := 0
	for _, im := range r.Images {
		if im.Class != class || im.Error != "" {
			continue
		}
		n++
		flatWorst = math.Max(flatWorst, im.FlatRMS)
		if im.Butteraugli != nil && im.JPEG90Butteraugli != nil {
			b3 = append(b3, im.Butteraugli.Norm3)
			bmax = append(bmax, im.Butteraugli.Max)
			if im.Butteraugli.Norm3 <= im.JPEG90Butteraugli.Norm3 {
				below++
			}
		}
	}
	if n == 0 {
		return
	}
	if len(b3) > 0 {
		frac := float64(below) / float64(len(b3))
		add(check("butteraugli 3-norm <= JPEG q90's", ">= 90% of images", fmt.Sprintf("%d of %d (%.0f%%)", below, len(b3), 100*frac), frac >= 0.9))
		m3, mm := median(b3), median(bmax)
		add(check("butteraugli 3-norm, median", "<= 0.7", fmt.Sprintf("%.2f", m3), m3 <= 0.7))
		add(check("butteraugli max-norm, median", "<= 2.0", fmt.Sprintf("%.2f", mm), mm <= 2.0))
	}
	add(check("RMS luma change, flattest 10% of 32x32 blocks", "<= 0.8 levels on every image", fmt.Sprintf("max %.2f", flatWorst), flatWorst <= 0.8))
	rate := func(name string, min float64, attacks ...string) {
		var sum float64
		k := 0
		for _, a := range attacks {
			if ar, ok := r.Lookup(a, class); ok {
				sum += ar.ExactRate * float64(ar.Images)
				k += ar.Images
			}
		}
		if k == 0 {
			add(TargetCheck{Name: name, Target: fmt.Sprintf(">= %.0f%%", min*100), Measured: "not measured", Skipped: true})
			return
		}
		v := sum / float64(k)
		add(check(name, fmt.Sprintf(">= %.0f%%", min*100), fmt.Sprintf("%.1f%% of %d", 100*v, k), v >= min-1e-9))
	}
	rate("exact id, clean", 1.00, "clean")
	rate("exact id, JPEG 50", 0.99, "jpeg50")
	rate("exact id, JPEG 30", 0.90, "jpeg30")
	rate("exact id, resize 0.5x", 0.99, "resize0.5")
	rate("exact id, crop to 71% per side", 0.98, "crop0.71")
	rate("exact id, crop to 55% per side", 0.95, "crop0.55")
	rate("exact id, rotation ±2°", 0.98, "rot+2", "rot-2")
	rate("exact id, screenshot chain", 0.98, "screenshot")
	rate("exact id, crop 71% + brightness x0.5 + JPEG 40", 0.85, "crop0.71+bright0.5+jpeg40")
}

func pct(v float64) string { return fmt.Sprintf("%.1f", 100*v) }

// WriteMarkdown writes the human-readable report.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Codec benchmark\n\n")
	fmt.Fprintf(&b, "Run %s, %s, %d CPUs, %d workers, seed %d, strength %.2f, PSNR floor %.1f dB, took %s.\n",
		r.Started.Format("2006-01-02 15:04 UTC"), r.GoVersion, r.CPUs, r.Workers, r.Seed, r.Strength, r.TargetPSNR, r.Duration)
	fmt.Fprintf(&b, "\nBuild: %s\n", r.Build)
	if r.Command != "" {
		fmt.Fprintf(&b, "\nCommand: `%s`\n", r.Command)
	}
	classes := r.classes()
	counts := map[string]int{}
	for _, im := range r.Images {
		counts[im.Class]++
	}
	fmt.Fprintf(&b, "\nImages per class:")
	for _, c := range classes {
		fmt.Fprintf(&b, " %s %d;", c, counts[c])
	}
	b.WriteString("\n")

	if len(r.Targets) > 0 {
		b.WriteString("\n## Targets (issue 11: photos and art >= 1 MP)\n\n| class | target | wanted | measured | |\n|---|---|---|---|---|\n")
		for _, t := range r.Targets {
			mark := "FAIL"
			switch {
			case t.Skipped:
				mark = "-"
			case t.Pass:
				mark = "pass"
			}
			cl := t.Class
			if cl == "" {
				cl = "all"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cl, t.Name, t.Target, t.Measured, mark)
		}
	}

	r.writePerceptual(&b, classes)

	b.WriteString("\n## Robustness\n\nExact id rate in % (bit accuracy) per class; bit accuracy counts 0.5 for an image the detector could not synchronise. Detect ms: mean detector time on the attacked images of all classes (workers running side by side).\n\n| attack |")
	for _, c := range classes {
		fmt.Fprintf(&b, " %s |", c)
	}
	b.WriteString(" wrong ids | detect ms | parameters |\n|---|")
	for range classes {
		b.WriteString("---|")
	}
	b.WriteString("---|---|---|\n")
	for _, name := range r.attackNames() {
		fmt.Fprintf(&b, "| %s |", name)
		wrong, detail := 0, ""
		var ms float64
		n := 0
		for _, c := range classes {
			if a, ok := r.Lookup(name, c); ok {
				fmt.Fprintf(&b, " %s (%.3f) |", pct(a.ExactRate), a.BitAcc)
				wrong += a.WrongIDs
				detail = a.Detail
				ms += a.DetectMs * float64(a.Images)
				n += a.Images
			} else {
				b.WriteString(" - |")
			}
		}
		fmt.Fprintf(&b, " %d | %.0f | %s |\n", wrong, ms/float64(max(n, 1)), detail)
	}

	fp := r.FalsePositives
	fmt.Fprintf(&b, "\n## False positives\n\n%d unmarked probes (%s): %d reported watermarked; confidence mean %.3f, max %.3f.\n",
		fp.Probes, fp.Description, fp.Watermarked, fp.MeanConfidence, fp.MaxConfidence)

	if len(r.Speed) > 0 {
		b.WriteString("\n## Speed (one operation at a time, median of runs)\n\n| size | pixels | embed | detect | embed per MP | detect per MP | content |\n|---|---|---|---|---|---|---|\n")
		for _, s := range r.Speed {
			fmt.Fprintf(&b, "| %s | %dx%d | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %s |\n", s.Label, s.Width, s.Height, s.EmbedMs, s.DetectMs, s.EmbedMsPerMP, s.DetectMsPerMP, s.Content)
		}
	}
	if len(r.Memory) > 0 {
		b.WriteString("\n## Memory (separate process, synthetic image)\n\n| op | pixels | time | CPU time | peak RSS | RSS before | peak Go heap | input image |\n|---|---|---|---|---|---|---|---|\n")
		for _, m := range r.Memory {
			fmt.Fprintf(&b, "| %s | %dx%d (%.1f MP) | %.2f s | %.2f s | %.0f MiB | %.0f MiB | %.0f MiB | %.0f MiB |\n", m.Op, m.Width, m.Height, m.Megapixels,
				m.Ms/1000, m.CPUMs/1000, mib(m.PeakRSSBytes), mib(m.StartRSSBytes), float64(m.PeakHeapBytes)/(1<<20), mib(m.InputBytes))
		}
	}

	b.WriteString("\n## Images\n\nEmbed and clean-detect times were taken with the workers running side by side.\n\n| image | class | pixels | PSNR dB | SSIM | embed ms | detect ms | embed ms/MP | note |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, im := range r.Images {
		perMP := 0.0
		if im.Megapixels > 0 {
			perMP = im.EmbedMs / im.Megapixels
		}
		fmt.Fprintf(&b, "| %s | %s | %dx%d | %.2f | %.4f | %.0f | %.0f | %.0f | %s |\n", im.Name, im.Class, im.Width, im.Height,
			im.PSNR, im.SSIM, im.EmbedMs, im.DetectMs, perMP, im.Error)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writePerceptual writes one table per class: what a person sees, the mark beside a JPEG q90 re-save.
func (r *Report) writePerceptual(b *strings.Builder, classes []string) {
	for _, c := range classes {
		var rows []ImageResult
		for _, im := range r.Images {
			if im.Class == c && im.Error == "" {
				rows = append(rows, im)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(b, "\n## Visibility: %s\n\nbutteraugli (3-norm / max-norm; 1.0 is about just noticeable) of the marked image and of a JPEG q90 re-save (Go image/jpeg, 4:2:0), each against the original; flat RMS: luma change in the flattest 10%% of 32x32 blocks, 8-bit levels; panel: original | marked | difference x8 of the flattest region.\n\n| image | PSNR dB | strength | mark 3-norm | mark max | JPEG q90 3-norm | JPEG q90 max | JPEG q90 PSNR | flat RMS | panel |\n|---|---|---|---|---|---|---|---|---|---|\n", c)
		var m3, j3, mm []float64
		for _, im := range rows {
			bm, bj := "-", "-"
			bmm, bjm := "-", "-"
			if im.Butteraugli != nil {
				bm, bmm = fmt.Sprintf("%.2f", im.Butteraugli.Norm3), fmt.Sprintf("%.2f", im.Butteraugli.Max)
				m3 = append(m3, im.Butteraugli.Norm3)
				mm = append(mm, im.Butteraugli.Max)
			}
			if im.JPEG90Butteraugli != nil {
				bj, bjm = fmt.Sprintf("%.2f", im.JPEG90Butteraugli.Norm3), fmt.Sprintf("%.2f", im.JPEG90Butteraugli.Max)
				j3 = append(j3, im.JPEG90Butteraugli.Norm3)
			}
			fmt.Fprintf(b, "| %s | %.1f | %.2f | %s | %s | %s | %s | %.1f | %.2f | %s |\n", im.Name, im.PSNR, im.Strength, bm, bmm, bj, bjm,
				im.JPEG90PSNR, im.FlatRMS, im.Panel)
		}
		if len(m3) > 0 {
			fmt.Fprintf(b, "| **median** | | | %.2f | %.2f | %.2f | | | | |\n", median(m3), median(mm), median(j3))
		}
	}
}

func mib(v int64) float64 { return float64(v) / (1 << 20) }

// classes lists the classes present, the target class first.
func (r *Report) classes() []string {
	seen := map[string]bool{}
	for _, im := range r.Images {
		seen[im.Class] = true
	}
	var out []string
	for c := range seen {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if (out[i] == TargetClass) != (out[j] == TargetClass) {
			return out[i] == TargetClass
		}
		return out[i] < out[j]
	})
	return out
}

// attackNames lists the attacks in report order.
func (r *Report) attackNames() []string {
	var out []string
	seen := map[string]bool{}
	for _, a := range r.Attacks {
		if !seen[a.Attack] {
			seen[a.Attack] = true
			out = append(out, a.Attack)
		}
	}
	return out
}

// WriteFiles writes report.json, report.md and chart.png into dir.
func (r *Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("codecbench: %w", err)
	}
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{{"report.json", r.WriteJSON}, {"report.md", r.WriteMarkdown}, {"chart.png", r.WriteChart}} {
		file, err := os.Create(filepath.Join(dir, f.name))
		if err != nil {
			return fmt.Errorf("codecbench: %w", err)
		}
		if err := f.write(file); err != nil {
			file.Close()
			return fmt.Errorf("codecbench: writing %s: %w", f.name, err)
		}
		if err := file.Close(); err != nil {
			return fmt.Errorf("codecbench: %w", err)
		}
	}
	return nil
}
