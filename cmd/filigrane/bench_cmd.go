package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"

	"filigrane/bench/attack"
	"filigrane/bench/codecbench"
	"filigrane/bench/corpus"
	"filigrane/bench/quality"
	"filigrane/codec"
	"filigrane/codec/imageio"
)

const benchUsage = `usage:
  filigrane bench codec [flags]   watermark quality, robustness, false positives, speed and memory
  filigrane bench api [flags]     load test of the HTTP API, one endpoint at a time
  filigrane bench load [flags]    a mix of operations open- or closed-loop, on a local cluster or running nodes
  filigrane bench chaos [flags]   the same load while nodes and the S3 server are killed, frozen and restarted
  filigrane bench video [flags]   video adapter: robustness on real clips, false positives, speed vs plain ffmpeg

Run "filigrane bench codec -h" for its flags; bench/README.md explains the method.
`

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, benchUsage)
		return 2
	}
	switch args[0] {
	case "codec":
		return runBenchCodec(ctx, args[1:], stdout, stderr)
	case "api":
		return runBenchAPI(ctx, args[1:], stdout, stderr)
	case "video":
		return runBenchVideo(ctx, args[1:], stdout, stderr)
	case "load":
		return runBenchLoad(ctx, args[1:], stdout, stderr, false)
	case "chaos":
		return runBenchLoad(ctx, args[1:], stdout, stderr, true)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, benchUsage)
		return 0
	}
	fmt.Fprintf(stderr, "filigrane bench: unknown benchmark %q\n\n%s", args[0], benchUsage)
	return 2
}

// memoryProbeSizes are the 12 MP and 40 MP images of the memory targets (40 MP is the service's pixel limit for
// direct requests).
func memoryProbeSizes() []string { return []string{"4000x3000", "7680x5200"} }

func runBenchCodec(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("filigrane bench codec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cacheDir  = fs.String("corpus", corpus.DefaultCacheDir(), "corpus cache directory (Debian packages are downloaded and extracted here once)")
		outDir    = fs.String("out", "bench/results/codec", "directory for report.json, report.md and chart.png")
		quick     = fs.Bool("quick", false, "quick mode: one attack per family, 4 photos, 200 false-positive probes, no memory probe")
		maxImages = fs.Int("max-images", 0, "use at most this many images of 1 MP or more of each kind: photo, art, graphic (0: all)")
		small     = fs.Int("small", 12, "also run this many photos under 1 MP (the 512-px regime), reported separately")
		fps       = fs.Int("false-positives", 2000, "number of unmarked probes (crops and rescales of the corpus)")
		workers   = fs.Int("workers", runtime.NumCPU(), "images processed concurrently")
		seed      = fs.Uint64("seed", 1, "seed for crop offsets, noise and probes")
		psnr      = fs.Float64("psnr", codec.DefaultPSNR, "embedding PSNR floor in dB")
		strength  = fs.Float64("strength", codec.DefaultStrength, "perceptual embedding strength (mark amplitude in visibility thresholds)")
		percept   = fs.Bool("butteraugli", true, "measure butteraugli of each marked image and of its JPEG q90 re-save (installs libjxl-devtools when missing)")
		keyFile   = fs.String("key-file", "", "deployment key file (default: $FILIGRANE_CODEC_KEY, else the development key)")
		speed     = fs.Bool("speed", true, "time 1 MP and 12 MP embed and detect one at a time")
		memory    = fs.Bool("memory", true, "measure peak memory of a 40 MP embed and detect in a child process")
		synthetic = fs.Int("synthetic", 0, "use this many generated images instead of the corpus (offline runs)")
		noFetch   = fs.Bool("no-fetch", false, "do not download the corpus; fail if it is not cached")
		kinds     = fs.String("kinds", "photo,art,graphic", "comma-separated image kinds of 1 MP or more to run (photo, art, graphic)")
		only      = fs.String("attacks", "", "comma-separated attack names to run (default: the whole suite, or the quick one)")
		probe     = fs.String("memory-probe", "", "internal: measure memory for a WxH image in this process and print JSON")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "filigrane bench codec: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cf := &codecFlags{keyFile: *keyFile}
	key, err := cf.key(io.Discard)
	if err != nil {
		fmt.Fprintln(stderr, "filigrane bench codec:", err)
		return 2
	}
	if *probe != "" {
		var w, h int
		if _, err := fmt.Sscanf(*probe, "%dx%d", &w, &h); err != nil || w < 1 || h < 1 {
			fmt.Fprintf(stderr, "filigrane bench codec: bad --memory-probe %q\n", *probe)
			return 2
		}
		res, err := codecbench.MeasureMemory(ctx, key, *psnr, w, h)
		if err != nil {
			fmt.Fprintln(stderr, "filigrane bench codec:", err)
			return 1
		}
		json.NewEncoder(stdout).Encode(res)
		return 0
	}

	cfg := codecbench.Config{Key: key, PSNR: *psnr, Strength: *strength, Perceptual: *percept,
		PanelDir: filepath.Join(*outDir, "flat"), Attacks: attack.Suite(), FalsePositives: *fps, Workers: *workers,
		Seed: *seed, Speed: *speed, Log: stderr}
	if *quick {
		cfg.Attacks = attack.Quick()
		if !flagSet(fs, "false-positives") {
			cfg.FalsePositives = 200
		}
		if !flagSet(fs, "max-images") {
			*maxImages = 4
		}
		if !flagSet(fs, "small") {
			*small = 2
		}
		if !flagSet(fs, "memory") {
			*memory = false
		}
	}

	if *only != "" {
		picked, err := pickAttacks(*only)
		if err != nil {
			fmt.Fprintln(stderr, "filigrane bench codec:", err)
			return 2
		}
		cfg.Attacks = picked
	}

	var sources []codecbench.Source
	if *synthetic > 0 {
		sources = syntheticSources(*synthetic)
	} else {
		if !*noFetch {
			if err := corpus.Fetch(ctx, *cacheDir, stderr); err != nil {
				fmt.Fprintln(stderr, "filigrane bench codec:", err, "(use --synthetic N to run without the corpus)")
				return 1
			}
		}
		photos, err := corpus.Load(ctx, *cacheDir, 0)
		if err != nil {
			fmt.Fprintln(stderr, "filigrane bench codec:", err)
			return 1
		}
		sources = selectSources(photos, *maxImages, *small, strings.Split(*kinds, ","))
		// Speed is measured on crops of the largest corpus image, whether or not the selection includes it.
		all := selectSources(photos, 0, 0, []string{corpus.KindPhoto, corpus.KindArt, corpus.KindGraphic})
		cfg.SpeedImage = func(w, h int) (*image.NRGBA, string) { return codecbench.SpeedImage(all, w, h) }
	}
	if cfg.Perceptual {
		if err := corpus.EnsureTool(ctx, quality.ButteraugliTool, "libjxl-devtools", stderr); err != nil {
			fmt.Fprintln(stderr, "filigrane bench codec:", err, "(or run with --butteraugli=false)")
			return 1
		}
	}
	if err := os.MkdirAll(cfg.PanelDir, 0o755); err != nil {
		fmt.Fprintln(stderr, "filigrane bench codec:", err)
		return 1
	}
	fmt.Fprintf(stderr, "bench codec: %d images, %d attacks, %d false-positive probes, %d workers\n",
		len(sources), len(cfg.Attacks), cfg.FalsePositives, cfg.Workers)

	rep, err := codecbench.Run(ctx, cfg, sources)
	if err != nil {
		fmt.Fprintln(stderr, "filigrane bench codec:", err)
		return 1
	}
	rep.Command = "filigrane bench codec " + strings.Join(args, " ")
	if *memory {
		mem, err := memoryInChild(ctx, key, *psnr)
		if err != nil {
			fmt.Fprintln(stderr, "filigrane bench codec: memory probe:", err)
			rep.Errors = append(rep.Errors, "memory probe: "+err.Error())
		}
		rep.Memory = mem
	}
	rep.CheckTargets()
	if err := rep.WriteFiles(*outDir); err != nil {
		fmt.Fprintln(stderr, "filigrane bench codec:", err)
		return 1
	}
	var md bytes.Buffer
	rep.WriteMarkdown(&md)
	// Print the summary part (everything before the per-image table).
	summary, _, _ := strings.Cut(md.String(), "\n## Images")
	fmt.Fprintln(stdout, summary)
	fmt.Fprintf(stdout, "\nwrote %s\n", filepath.Join(*outDir, "{report.json,report.md,chart.png}"))
	if len(rep.Errors) > 0 {
		fmt.Fprintf(stderr, "filigrane bench codec: %d errors, first: %s\n", len(rep.Errors), rep.Errors[0])
		return 1
	}
	return 0
}

// pickAttacks selects attacks of the full suite by name.
func pickAttacks(list string) ([]attack.Attack, error) {
	byName := map[string]attack.Attack{}
	var names []string
	for _, a := range attack.Suite() {
		byName[a.Name] = a
		names = append(names, a.Name)
	}
	var out []attack.Attack
	for _, n := range strings.Split(list, ",") {
		a, ok := byName[strings.TrimSpace(n)]
		if !ok {
			return nil, fmt.Errorf("unknown attack %q (known: %s)", n, strings.Join(names, ", "))
		}
		out = append(out, a)
	}
	return out, nil
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// selectSources keeps the images of 1 MP or more (at most maxImages, spread over photos and graphics) and up to
// small photos under 1 MP of at least 0.2 MP.
func selectSources(photos []corpus.Photo, maxImages, small int, kinds []string) []codecbench.Source {
	var tiny []corpus.Photo
	byKind := map[string][]corpus.Photo{}
	for _, p := range photos {
		kind := corpus.Kind(p.Name)
		switch {
		case p.Pixels() >= 1_000_000:
			byKind[kind] = append(byKind[kind], p)
		case kind == corpus.KindPhoto && p.Pixels() >= 200_000:
			tiny = append(tiny, p)
		}
	}
	// Per kind (photos, then art, then other graphics), smallest first, so that a limited run covers each class
	// quickly.
	var big []corpus.Photo
	for _, kind := range []string{corpus.KindPhoto, corpus.KindArt, corpus.KindGraphic} {
		if !slices.Contains(kinds, kind) {
			continue
		}
		list := byKind[kind]
		sort.SliceStable(list, func(i, j int) bool { return list[i].Pixels() < list[j].Pixels() })
		if maxImages > 0 && len(list) > maxImages {
			list = list[:maxImages]
		}
		big = append(big, list...)
	}
	if len(tiny) > small {
		tiny = tiny[:small]
	}
	var out []codecbench.Source
	for _, p := range append(big, tiny...) {
		path := p.Path
		out = append(out, codecbench.Source{Name: p.Name, Kind: corpus.Kind(p.Name), Width: p.Width, Height: p.Height,
			Load: func() (image.Image, error) {
				f, err := os.Open(path)
				if err != nil {
					return nil, err
				}
				defer f.Close()
				pic, err := imageio.Decode(f, imageio.Limits{})
				if err != nil {
					return nil, err
				}
				return pic.Image, nil
			}})
	}
	return out
}

func syntheticSources(n int) []codecbench.Source {
	sizes := [][2]int{{1024, 1024}, {1600, 1200}, {640, 480}, {2048, 1536}}
	var out []codecbench.Source
	for i := 0; i < n; i++ {
		w, h, seed := sizes[i%len(sizes)][0], sizes[i%len(sizes)][1], uint64(i+1)
		out = append(out, codecbench.Source{Name: fmt.Sprintf("synthetic-%02d", i), Kind: "synthetic", Width: w, Height: h,
			Load: func() (image.Image, error) { return codecbench.Texture(w, h, seed), nil }})
	}
	return out
}

// memoryInChild re-runs this binary with --memory-probe so the peak RSS covers only the 40 MP work.
func memoryInChild(ctx context.Context, key []byte, psnr float64) ([]codecbench.MemoryResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var all []codecbench.MemoryResult
	for _, size := range memoryProbeSizes() {
		cmd := exec.CommandContext(ctx, exe, "bench", "codec", "--memory-probe", size, "--psnr", fmt.Sprint(psnr))
		// One core: the targets are per core, and the peak memory must not depend on parallel garbage.
		cmd.Env = append(os.Environ(), "FILIGRANE_CODEC_KEY="+string(key), "GOMAXPROCS=1")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return all, fmt.Errorf("%s: %v: %s", size, err, strings.TrimSpace(errb.String()))
		}
		var res []codecbench.MemoryResult
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			return all, fmt.Errorf("reading probe output: %w", err)
		}
		all = append(all, res...)
	}
	return all, nil
}
