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

// TargetClass is the class the targets apply to: photos of 1 MP or more.
const TargetClass = "photo>=1MP"

// TargetCheck compares one measurement with the target.
type TargetCheck struct {
	Name     string `json:"name"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Pass     bool   `json:"pass"`
	Skipped  bool   `json:"skipped,omitempty"` // the run did not include what the target needs
}

func check(name, target, measured string, pass bool) TargetCheck {
	return TargetCheck{Name: name, Target: target, Measured: measured, Pass: pass}
}

// CheckTargets compares the run with the targets of issue 4 and stores the verdicts in r.Targets.
func (r *Report) CheckTargets() {
	r.Targets = nil
	rate := func(name string, min float64, attacks ...string) {
		var sum float64
		n := 0
		for _, a := range attacks {
			if ar, ok := r.Lookup(a, TargetClass); ok {
				sum += ar.ExactRate * float64(ar.Images)
				n += ar.Images
			}
		}
		if n == 0 {
			r.Targets = append(r.Targets, TargetCheck{Name: name, Target: fmt.Sprintf(">= %.0f%%", min*100), Measured: "not measured", Skipped: true})
			return
		}
		v := sum / float64(n)
		r.Targets = append(r.Targets, check(name, fmt.Sprintf(">= %.0f%%", min*100),
			fmt.Sprintf("%.1f%% of %d", 100*v, n), v >= min-1e-9))
	}
	rate("exact id, clean", 1.00, "clean")
	rate("exact id, JPEG 75", 0.99, "jpeg75")
	rate("exact id, JPEG 50", 0.97, "jpeg50")
	rate("exact id, JPEG 30", 0.85, "jpeg30")
	rate("exact id, resize 0.5x", 0.99, "resize0.5")
	rate("exact id, crop to 71% per side", 0.95, "crop0.71")
	rate("exact id, rotation ±2°", 0.95, "rot+2", "rot-2")
	rate("exact id, brightness ±30%", 0.99, "bright+30", "bright-30")
	rate("exact id, contrast ±30%", 0.99, "contrast+30", "contrast-30")

	minPSNR := math.Inf(1)
	for _, im := range r.Images {
		if im.Class == TargetClass && im.Error == "" {
			minPSNR = math.Min(minPSNR, im.PSNR)
		}
	}
	if !math.IsInf(minPSNR, 1) {
		r.Targets = append(r.Targets, check("PSNR of every marked photo", ">= 40 dB", fmt.Sprintf("min %.2f dB", minPSNR), minPSNR >= 40))
	}
	wrong := 0
	for _, a := range r.Attacks {
		wrong += a.WrongIDs
	}
	fp := r.FalsePositives
	r.Targets = append(r.Targets, check("no false positive", "0 unmarked probes watermarked, 0 wrong ids",
		fmt.Sprintf("%d of %d probes, %d wrong ids under attack", fp.Watermarked, fp.Probes, wrong),
		fp.Watermarked == 0 && wrong == 0 && fp.Probes > 0))
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
		if m.Op == "embed" {
			r.Targets = append(r.Targets, check(fmt.Sprintf("%.0f MP embed peak memory (RSS)", m.Megapixels), "< 1 GB",
				fmt.Sprintf("%.0f MiB", float64(m.PeakRSSBytes)/(1<<20)), m.PeakRSSBytes > 0 && m.PeakRSSBytes < 1e9))
		}
	}
}

func pct(v float64) string { return fmt.Sprintf("%.1f", 100*v) }

// WriteMarkdown writes the human-readable report.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Codec benchmark\n\n")
	fmt.Fprintf(&b, "Run %s, %s, %d CPUs, %d workers, seed %d, target PSNR %.1f dB, took %s.\n",
		r.Started.Format("2006-01-02 15:04 UTC"), r.GoVersion, r.CPUs, r.Workers, r.Seed, r.TargetPSNR, r.Duration)
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
		b.WriteString("\n## Targets (issue 4, photos >= 1 MP)\n\n| target | wanted | measured | |\n|---|---|---|---|\n")
		for _, t := range r.Targets {
			mark := "FAIL"
			switch {
			case t.Skipped:
				mark = "-"
			case t.Pass:
				mark = "pass"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.Name, t.Target, t.Measured, mark)
		}
	}

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
		b.WriteString("\n## Memory (separate process, synthetic image)\n\n| op | pixels | time | peak RSS | RSS before | peak Go heap | input image |\n|---|---|---|---|---|---|---|\n")
		for _, m := range r.Memory {
			fmt.Fprintf(&b, "| %s | %dx%d (%.1f MP) | %.2f s | %.0f MiB | %.0f MiB | %.0f MiB | %.0f MiB |\n", m.Op, m.Width, m.Height, m.Megapixels,
				m.Ms/1000, mib(m.PeakRSSBytes), mib(m.StartRSSBytes), float64(m.PeakHeapBytes)/(1<<20), mib(m.InputBytes))
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
