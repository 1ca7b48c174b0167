package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"filigrane/bench/corpus"
	"filigrane/bench/videobench"
	"filigrane/codec"
	"filigrane/codec/video"
)

// isVideoPath reports whether a file name is handled by the video adapter (MP4 and MOV).
func isVideoPath(p string) bool {
	switch strings.ToLower(filepath.Ext(p)) {
	case ".mp4", ".mov", ".m4v":
		return true
	}
	return false
}

// videoEmbed is `codec embed` for MP4/MOV input: the output keeps the input's container.
func videoEmbed(ctx context.Context, c *codec.Codec, in, out string, id codec.ID, opt video.Options, asJSON bool,
	stdout, stderr io.Writer) int {
	if strings.ToLower(filepath.Ext(out)) != strings.ToLower(filepath.Ext(in)) && !(isVideoPath(out) && isVideoPath(in)) {
		fmt.Fprintf(stderr, "filigrane codec embed: a video output keeps the container; name it *%s, not %q\n",
			filepath.Ext(in), out)
		return 2
	}
	a := &video.Adapter{Codec: c}
	rep, err := a.Embed(ctx, in, out, id, opt)
	if err != nil {
		fmt.Fprintf(stderr, "filigrane codec embed: %s: %s\n", in, video.Reason(err))
		return 1
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			WatermarkID string `json:"watermark_id"`
			Output      string `json:"output"`
			video.EmbedReport
		}{id.String(), out, rep})
		return 0
	}
	fmt.Fprintf(stdout, "watermark_id: %s\nframe_count: %d\n", id, rep.FrameCount)
	return 0
}

// videoDetect is `codec detect` for MP4/MOV input; units are seconds of the video.
func videoDetect(ctx context.Context, c *codec.Codec, in string, stdout, stderr io.Writer) int {
	a := &video.Adapter{Codec: c}
	d, err := a.Detect(ctx, in)
	if err != nil {
		fmt.Fprintf(stderr, "filigrane codec detect: %s: %s\n", in, video.Reason(err))
		return 1
	}
	if !d.Watermarked {
		d.WatermarkID = nil
	}
	if d.Units == nil {
		d.Units = []codec.Unit{}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		fmt.Fprintln(stderr, "filigrane codec detect:", err)
		return 1
	}
	return 0
}

// runBenchVideo is `filigrane bench video`: robustness, false positives and speed of the video adapter on real
// clips (bench/videobench).
func runBenchVideo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("filigrane bench video", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cacheDir := fs.String("corpus", corpus.DefaultCacheDir(), "corpus cache directory (Debian packages are downloaded and extracted here once)")
	work := fs.String("work", filepath.Join(corpus.DefaultCacheDir(), "video"), "converted clips (kept) and scratch files")
	outDir := fs.String("out", "bench/results/video", "directory for report.json and report.md")
	excerpts := fs.Int("excerpts", 3, "marked 2-second excerpts per clip")
	negatives := fs.Int("negatives", 108, "unmarked clips and excerpts for the false-positive count")
	only := fs.String("only", "", "only the clips whose name contains this")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rep, err := videobench.Run(ctx, videobench.Config{CorpusDir: *cacheDir, WorkDir: *work,
		Key: []byte(codec.DevelopmentKey), Excerpts: *excerpts, Negatives: *negatives, Seed: 14, Only: *only, Log: stderr})
	if err != nil {
		fmt.Fprintln(stderr, "filigrane bench video:", err)
		return 1
	}
	if err := rep.WriteFiles(*outDir); err != nil {
		fmt.Fprintln(stderr, "filigrane bench video:", err)
		return 1
	}
	fmt.Fprint(stdout, rep.Markdown())
	return 0
}
