// Package videobench measures the video adapter on real clips: exact-id recovery after the issue's
// transformations, false positives on unmarked clips and excerpts, and the embedding pipeline's time against a
// plain ffmpeg libx264 re-encode with the same settings on the same file, measured side by side.
//
// The clips are converted once from the videos of Debian's opencv-doc package (bench/corpus downloads it) plus
// one pan over a photo of mate-backgrounds, into several codecs and both containers.
package videobench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"filigrane/bench/corpus"
	"filigrane/codec"
	"filigrane/codec/video"
)

// clipSpec is one clip converted from the corpus: input file (relative to the corpus root), start and length in
// seconds, extra ffmpeg input options (before -i), output options, and the output name (its extension is the
// container).
type clipSpec struct {
	name, src    string
	start, dur   float64
	inOpts, opts []string
}

const dataDir = "usr/share/doc/opencv-doc/examples/data"

var h264 = []string{"-c:v", "libx264", "-preset", "medium", "-crf", "18", "-pix_fmt", "yuv420p"}

func clipSpecs() []clipSpec {
	return []clipSpec{
		{name: "vtest-a.mp4", src: dataDir + "/vtest.avi", start: 0, dur: 10, opts: h264},
		{name: "vtest-b.mov", src: dataDir + "/vtest.avi", start: 30, dur: 10, opts: h264},
		{name: "vtest-c-hevc10.mp4", src: dataDir + "/vtest.avi", start: 60, dur: 10,
			opts: []string{"-c:v", "libx265", "-preset", "fast", "-crf", "20", "-pix_fmt", "yuv420p10le", "-tag:v",
				"hvc1", "-x265-params", "log-level=error"}},
		{name: "megamind.mp4", src: dataDir + "/Megamind.avi", start: 0, dur: 11, opts: h264},
		{name: "megamind-bugy-vp9.mp4", src: dataDir + "/Megamind_bugy.avi", start: 0, dur: 9,
			opts: []string{"-c:v", "libvpx-vp9", "-deadline", "good", "-cpu-used", "5", "-b:v", "2M"}},
		{name: "tree.mp4", src: dataDir + "/tree.avi", start: 0, dur: 10, opts: h264},
		{name: "tree-b-mpeg4.mov", src: dataDir + "/tree.avi", start: 15, dur: 10,
			opts: []string{"-c:v", "mpeg4", "-q:v", "3"}},
		{name: "megamind-av1.mp4", src: dataDir + "/Megamind.avi", start: 2, dur: 6,
			opts: []string{"-c:v", "libsvtav1", "-preset", "10", "-crf", "30"}},
		{name: "pan-photo-720p.mp4", src: "usr/share/backgrounds/mate/nature/Garden.jpg", dur: 8,
			inOpts: []string{"-loop", "1", "-framerate", "30"},
			opts: append([]string{"-vf", "scale=2560:-2,zoompan=z='1.2+0.002*on':x='on*2':y='on':d=1:s=1280x720:fps=30," +
				"noise=alls=3:allf=t", "-r", "30"}, h264...)},
	}
}

// Config of one run.
type Config struct {
	CorpusDir string
	WorkDir   string // converted clips (kept between runs) and scratch files
	Key       []byte
	Excerpts  int // marked 2-second excerpts per clip
	Negatives int // unmarked clips and excerpts to test
	Seed      uint64
	Only      string // when set, only clips whose name contains it
	Log       io.Writer
}

// Trial is one detection.
type Trial struct {
	Clip, Attack string
	Recovered    bool // exact id
	Snapped      bool // exact id after Snap against the issued ids (when the blind decode failed)
	Watermarked  bool
	Units, Hits  int
	Err          string `json:",omitempty"`
}

// Speed is one side-by-side timing.
type Speed struct {
	Clip                       string
	Frames                     int64
	Width, Height              int
	BaselineWall, PipelineWall float64 // seconds
	BaselineCPU, PipelineCPU   float64 // user+sys seconds of all processes
}

// Report of a run.
type Report struct {
	Clips     []string
	Trials    []Trial
	Negatives []Trial
	Speed     []Speed
}

func run(ctx context.Context, log io.Writer, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, lastLine(out))
	}
	return nil
}

func lastLine(b []byte) string {
	s := strings.Split(strings.TrimSpace(string(b)), "\n")
	return s[len(s)-1]
}

// prepareClips converts the corpus clips once into dir.
func prepareClips(ctx context.Context, cfg Config) ([]string, error) {
	if err := corpus.Fetch(ctx, cfg.CorpusDir, cfg.Log); err != nil {
		return nil, err
	}
	dir := filepath.Join(cfg.WorkDir, "clips")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []string
	for _, c := range clipSpecs() {
		if cfg.Only != "" && !strings.Contains(c.name, cfg.Only) {
			continue
		}
		dst := filepath.Join(dir, c.name)
		if _, err := os.Stat(dst); err != nil {
			fmt.Fprintf(cfg.Log, "videobench: converting %s\n", c.name)
			args := []string{"-nostdin", "-v", "error", "-y"}
			if c.start > 0 {
				args = append(args, "-ss", fmt.Sprint(c.start))
			}
			args = append(args, c.inOpts...)
			args = append(args, "-i", filepath.Join(cfg.CorpusDir, "root", c.src), "-t", fmt.Sprint(c.dur))
			args = append(args, c.opts...)
			args = append(args, "-c:a", "aac", "-b:a", "128k", dst+".tmp"+filepath.Ext(dst))
			if err := run(ctx, cfg.Log, "ffmpeg", args...); err != nil {
				return nil, err
			}
			if err := os.Rename(dst+".tmp"+filepath.Ext(dst), dst); err != nil {
				return nil, err
			}
		}
		out = append(out, dst)
	}
	return out, nil
}

// attack makes a transformed copy of f into dir; it returns the new path.
type attack struct {
	name string
	make func(ctx context.Context, f, dir string, r *rand.Rand) (string, error)
}

func reencode(name string, opts ...string) attack {
	return attack{name, func(ctx context.Context, f, dir string, _ *rand.Rand) (string, error) {
		dst := filepath.Join(dir, name+filepath.Ext(f))
		args := append([]string{"-nostdin", "-v", "error", "-y", "-i", f}, opts...)
		return dst, run(ctx, nil, "ffmpeg", append(args, "-c:a", "copy", dst)...)
	}}
}

var x264 = []string{"-c:v", "libx264", "-preset", "veryfast", "-crf", "23"}

func attacks() []attack {
	return []attack{
		{"output", func(_ context.Context, f, _ string, _ *rand.Rand) (string, error) { return f, nil }},
		reencode("x264-crf30", "-c:v", "libx264", "-preset", "medium", "-crf", "30"),
		reencode("x265-crf28", "-c:v", "libx265", "-preset", "fast", "-crf", "28", "-x265-params", "log-level=error"),
		reencode("half-size", append([]string{"-vf", "scale=trunc(iw/4)*2:trunc(ih/4)*2"}, x264...)...),
		reencode("crop-80pct", append([]string{"-vf", "crop=trunc(iw*0.8/2)*2:trunc(ih*0.8/2)*2"}, x264...)...),
		reencode("fps-24", append([]string{"-vf", "fps=24"}, x264...)...),
		{"mp4-mov", func(ctx context.Context, f, dir string, _ *rand.Rand) (string, error) {
			ext := ".mov"
			if filepath.Ext(f) == ".mov" {
				ext = ".mp4"
			}
			dst := filepath.Join(dir, "converted"+ext)
			return dst, run(ctx, nil, "ffmpeg", "-nostdin", "-v", "error", "-y", "-i", f, "-c", "copy", dst)
		}},
	}
}

// excerpt cuts 2 seconds from a random position of f (re-encoded, as a trimming editor does).
func excerpt(ctx context.Context, f, dst string, dur float64, r *rand.Rand) error {
	start := 0.0
	if dur > 2.5 {
		start = r.Float64() * (dur - 2.2)
	}
	return run(ctx, nil, "ffmpeg", append([]string{"-nostdin", "-v", "error", "-y", "-ss", fmt.Sprintf("%.2f", start),
		"-i", f, "-t", "2"}, append(x264, "-c:a", "copy", dst)...)...)
}

// Run performs the whole benchmark.
func Run(ctx context.Context, cfg Config) (Report, error) {
	var rep Report
	c, err := codec.New(cfg.Key)
	if err != nil {
		return rep, err
	}
	a := &video.Adapter{Codec: c}
	clips, err := prepareClips(ctx, cfg)
	if err != nil {
		return rep, err
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 7))
	scratch := filepath.Join(cfg.WorkDir, "scratch")
	issued := make([]codec.ID, 0, len(clips))
	for i := range clips {
		var id codec.ID
		for k := range id {
			id[k] = byte(r.IntN(256))
		}
		_ = i
		issued = append(issued, id)
	}
	for i, clip := range clips {
		name := filepath.Base(clip)
		rep.Clips = append(rep.Clips, name)
		dir := filepath.Join(scratch, name)
		os.RemoveAll(dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return rep, err
		}
		info, err := a.Probe(ctx, clip)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", name, err)
		}
		// Side by side: the plain re-encode, then the pipeline, on the same file with the same settings.
		base := filepath.Join(dir, "baseline"+filepath.Ext(clip))
		bw, bc, err := timed(func() error {
			return run(ctx, nil, "ffmpeg", "-nostdin", "-v", "error", "-y", "-i", clip, "-map", "0:v:0", "-map", "0:a?",
				"-c:v", "libx264", "-preset", video.DefaultPreset, "-crf", fmt.Sprint(video.DefaultCRF), "-c:a", "copy",
				"-movflags", "+faststart", base)
		})
		if err != nil {
			return rep, err
		}
		out := filepath.Join(dir, "marked"+filepath.Ext(clip))
		var er video.EmbedReport
		pw, pc, err := timed(func() error {
			var err error
			er, err = a.Embed(ctx, clip, out, issued[i], video.Options{})
			return err
		})
		if err != nil {
			return rep, fmt.Errorf("%s: embed: %w", name, err)
		}
		rep.Speed = append(rep.Speed, Speed{Clip: name, Frames: er.FrameCount, Width: er.Width, Height: er.Height,
			BaselineWall: bw, PipelineWall: pw, BaselineCPU: bc, PipelineCPU: pc})
		fmt.Fprintf(cfg.Log, "videobench: %s %dx%d %d frames: baseline %.1fs, pipeline %.1fs (ratio %.2f)\n", name,
			er.Width, er.Height, er.FrameCount, bw, pw, pw/bw)
		detect := func(attackName, f string) Trial {
			t := Trial{Clip: name, Attack: attackName}
			d, err := a.Detect(ctx, f)
			if err != nil {
				t.Err = video.Reason(err)
				return t
			}
			t.Watermarked = d.Watermarked
			t.Recovered = d.Watermarked && d.WatermarkID != nil && *d.WatermarkID == issued[i].String()
			if !t.Recovered {
				if id, ok := c.Snap(d, issued); ok && id == issued[i] {
					t.Snapped = true
				}
			}
			t.Units = len(d.Units)
			for _, u := range d.Units {
				if u.Watermarked {
					t.Hits++
				}
			}
			return t
		}
		for _, at := range attacks() {
			f, err := at.make(ctx, out, dir, r)
			var t Trial
			if err != nil {
				t = Trial{Clip: name, Attack: at.name, Err: err.Error()}
			} else {
				t = detect(at.name, f)
			}
			rep.Trials = append(rep.Trials, t)
			fmt.Fprintf(cfg.Log, "videobench:   %-12s recovered %v snapped %v units %d/%d %s\n", at.name, t.Recovered,
				t.Snapped, t.Hits, t.Units, t.Err)
		}
		for k := 0; k < cfg.Excerpts; k++ {
			f := filepath.Join(dir, fmt.Sprintf("excerpt%d%s", k, filepath.Ext(clip)))
			var t Trial
			if err := excerpt(ctx, out, f, info.Duration, r); err != nil {
				t = Trial{Clip: name, Attack: "excerpt-2s", Err: err.Error()}
			} else {
				t = detect("excerpt-2s", f)
			}
			rep.Trials = append(rep.Trials, t)
			fmt.Fprintf(cfg.Log, "videobench:   excerpt-2s   recovered %v snapped %v units %d/%d %s\n", t.Recovered,
				t.Snapped, t.Hits, t.Units, t.Err)
		}
	}
	// False positives: the unmarked clips, then unmarked 2-second excerpts until Negatives are done.
	for k := 0; k < cfg.Negatives; k++ {
		clip := clips[k%len(clips)]
		f := clip
		if k >= len(clips) {
			f = filepath.Join(scratch, fmt.Sprintf("negative%d%s", k, filepath.Ext(clip)))
			info, err := a.Probe(ctx, clip)
			if err != nil {
				return rep, err
			}
			if err := excerpt(ctx, clip, f, info.Duration, r); err != nil {
				return rep, err
			}
		}
		t := Trial{Clip: filepath.Base(clip), Attack: "unmarked"}
		d, err := a.Detect(ctx, f)
		if err != nil {
			t.Err = video.Reason(err)
		} else {
			t.Watermarked = d.Watermarked
			_, t.Snapped = c.Snap(d, issued)
		}
		if f != clip {
			os.Remove(f)
		}
		rep.Negatives = append(rep.Negatives, t)
		if t.Watermarked || t.Snapped {
			fmt.Fprintf(cfg.Log, "videobench: FALSE POSITIVE on %s (%s)\n", f, t.Clip)
		}
	}
	return rep, nil
}

// timed returns the wall time and the CPU time (user+sys of this process and its children) of fn.
func timed(fn func() error) (wall, cpu float64, err error) {
	cpuNow := func() float64 {
		var s, c syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &s)     //nolint:errcheck
		syscall.Getrusage(syscall.RUSAGE_CHILDREN, &c) //nolint:errcheck
		tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
		return tv(s.Utime) + tv(s.Stime) + tv(c.Utime) + tv(c.Stime)
	}
	c0, t0 := cpuNow(), time.Now()
	err = fn()
	return time.Since(t0).Seconds(), cpuNow() - c0, err
}

// Markdown renders the report as tables.
func (rep Report) Markdown() string {
	var b strings.Builder
	type agg struct{ n, rec, snap int }
	by := map[string]*agg{}
	var order []string
	for _, t := range rep.Trials {
		g := by[t.Attack]
		if g == nil {
			g = &agg{}
			by[t.Attack] = g
			order = append(order, t.Attack)
		}
		g.n++
		if t.Recovered {
			g.rec++
		}
		if t.Recovered || t.Snapped {
			g.snap++
		}
	}
	fmt.Fprintf(&b, "| transformation | trials | exact id (blind decode) | exact id (decode or snap to issued ids) |\n")
	fmt.Fprintf(&b, "|---|---|---|---|\n")
	for _, k := range order {
		g := by[k]
		fmt.Fprintf(&b, "| %s | %d | %d (%.0f%%) | %d (%.0f%%) |\n", k, g.n, g.rec, 100*float64(g.rec)/float64(g.n),
			g.snap, 100*float64(g.snap)/float64(g.n))
	}
	fp, fps := 0, 0
	for _, t := range rep.Negatives {
		if t.Watermarked {
			fp++
		}
		if t.Snapped {
			fps++
		}
	}
	fmt.Fprintf(&b, "\nFalse positives: %d of %d unmarked clips and excerpts (blind decode), %d snapped to an issued id.\n\n",
		fp, len(rep.Negatives), fps)
	fmt.Fprintf(&b, "| clip | size | frames | plain ffmpeg x264 wall / CPU s | pipeline wall / CPU s | ratio wall / CPU |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|\n")
	var bw, pw, bc, pc float64
	for _, s := range rep.Speed {
		fmt.Fprintf(&b, "| %s | %dx%d | %d | %.1f / %.1f | %.1f / %.1f | %.2f / %.2f |\n", s.Clip, s.Width, s.Height,
			s.Frames, s.BaselineWall, s.BaselineCPU, s.PipelineWall, s.PipelineCPU, s.PipelineWall/s.BaselineWall,
			s.PipelineCPU/s.BaselineCPU)
		bw += s.BaselineWall
		pw += s.PipelineWall
		bc += s.BaselineCPU
		pc += s.PipelineCPU
	}
	fmt.Fprintf(&b, "| **all** | | | %.1f / %.1f | %.1f / %.1f | **%.2f / %.2f** |\n", bw, bc, pw, pc, pw/bw, pc/bc)
	var fails []string
	for _, t := range rep.Trials {
		if !t.Recovered {
			fails = append(fails, fmt.Sprintf("%s/%s (snapped %v, units %d/%d%s)", t.Clip, t.Attack, t.Snapped,
				t.Hits, t.Units, errSuffix(t.Err)))
		}
	}
	sort.Strings(fails)
	if len(fails) > 0 {
		fmt.Fprintf(&b, "\nNot recovered by the blind decode: %s.\n", strings.Join(fails, "; "))
	}
	return b.String()
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return ", error " + e
}

// WriteFiles writes report.json and report.md into dir.
func (rep Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), js, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(rep.Markdown()), 0o644)
}
