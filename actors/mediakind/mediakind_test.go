package mediakind_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
)

func mustKind(t *testing.T, m jobstate.Media) mediakind.Kind {
	t.Helper()
	k, ok := mediakind.ByMedia(m)
	if !ok {
		t.Fatalf("no row for %s", m)
	}
	return k
}

// TestTableMatchesSpec asserts the table against the spec's numbers (service-interface.md section 8).
func TestTableMatchesSpec(t *testing.T) {
	const MB = 1_000_000
	cases := []struct {
		media                                  jobstate.Media
		prefix                                 string
		directEmbed, uploadEmbed, uploadDetect int64
		syncDetect                             bool
		embedPixels                            int64
		outputMIME                             string
	}{
		{jobstate.MediaImage, "/watermarks/images", 40 * MB, 50 * MB, 192 * MB, true, 40 * MB, "image/png"},
		{jobstate.MediaDocument, "/watermarks/documents", 20 * MB, 20 * MB, 64 * MB, true, 0, "application/pdf"},
		{jobstate.MediaVideo, "/watermarks/videos", 20 * MB, 20 * MB, 100 * MB, false, 0, "video/mp4"},
	}
	for _, c := range cases {
		k := mustKind(t, c.media)
		if k.RoutePrefix != c.prefix || k.OutputMIME != c.outputMIME {
			t.Errorf("%s: prefix %q output %q", c.media, k.RoutePrefix, k.OutputMIME)
		}
		if got := k.DirectLimit(jobstate.OperationEmbed); got != c.directEmbed {
			t.Errorf("%s: direct embed %d, want %d", c.media, got, c.directEmbed)
		}
		if got := k.UploadLimit(jobstate.OperationEmbed); got != c.uploadEmbed {
			t.Errorf("%s: upload embed %d, want %d", c.media, got, c.uploadEmbed)
		}
		if k.Limits.BatchMember != c.uploadEmbed {
			t.Errorf("%s: batch member %d, want the embed-upload limit %d (spec 8: embed via upload or batch)", c.media, k.Limits.BatchMember, c.uploadEmbed)
		}
		if got := k.UploadLimit(jobstate.OperationDetect); got != c.uploadDetect {
			t.Errorf("%s: upload detect %d, want %d", c.media, got, c.uploadDetect)
		}
		if got := k.DirectLimit(jobstate.OperationDetect); got != 40*MB {
			t.Errorf("%s: direct detect %d; files over 40 MB go through an upload", c.media, got)
		}
		if k.SyncDetect() != c.syncDetect {
			t.Errorf("%s: sync detect %v", c.media, k.SyncDetect())
		}
		if c.syncDetect && k.Limits.SyncDetect != 95*MB {
			t.Errorf("%s: sync detect answers up to %d, want 95 MB", c.media, k.Limits.SyncDetect)
		}
		if got := k.MaxPixels(jobstate.OperationEmbed); got != c.embedPixels {
			t.Errorf("%s: embed pixels %d, want %d", c.media, got, c.embedPixels)
		}
		if k.SyncWait != 20*time.Second {
			t.Errorf("%s: sync wait %v", c.media, k.SyncWait)
		}
		if k.MaxInput(jobstate.OperationDetect) != c.uploadDetect {
			t.Errorf("%s: max detect input %d", c.media, k.MaxInput(jobstate.OperationDetect))
		}
	}
}

func TestDeadlines(t *testing.T) {
	img, pdf, vid := mustKind(t, jobstate.MediaImage), mustKind(t, jobstate.MediaDocument), mustKind(t, jobstate.MediaVideo)
	cases := []struct {
		k    mediakind.Kind
		info mediakind.Info
		want time.Duration
	}{
		{img, mediakind.Info{Frames: 1}, 30 * time.Minute},
		{pdf, mediakind.Info{Pages: 500}, 30 * time.Minute},
		{vid, mediakind.Info{Frames: 240}, 30*time.Minute + 240*15*time.Second},
		{vid, mediakind.Info{Frames: 1_000_000}, 90 * time.Minute},
	}
	for _, c := range cases {
		if got := c.k.Deadline(c.info); got != c.want {
			t.Errorf("%s %+v: deadline %v, want %v", c.k.Media, c.info, got, c.want)
		}
	}
}

// TestPrices: image or PDF embed 1 credit per file, video 1 per started minute or per 3,600 frames when that
// counts more, detection 1 per file (README "Plans and prices"), with rates that differ so that a rule reading
// the wrong rate shows. Before frames were priced, 36,000 frames declaring one second cost one minute's rate.
func TestPrices(t *testing.T) {
	r := mediakind.Rates{ImageEmbed: 2, DocumentEmbed: 3, VideoEmbedPerMinute: 5, Detect: 7}
	img, pdf, vid := mustKind(t, jobstate.MediaImage), mustKind(t, jobstate.MediaDocument), mustKind(t, jobstate.MediaVideo)
	cases := []struct {
		k    mediakind.Kind
		op   jobstate.Operation
		info mediakind.Info
		want int64
	}{
		{img, jobstate.OperationEmbed, mediakind.Info{}, 2},
		{pdf, jobstate.OperationEmbed, mediakind.Info{Pages: 40}, 3},
		{vid, jobstate.OperationEmbed, mediakind.Info{Duration: 0}, 5},
		{vid, jobstate.OperationEmbed, mediakind.Info{Duration: 59 * time.Second}, 5},
		{vid, jobstate.OperationEmbed, mediakind.Info{Duration: time.Minute}, 5},
		{vid, jobstate.OperationEmbed, mediakind.Info{Duration: time.Minute + time.Millisecond}, 10},
		// Frames count when they are more than the started minutes pay for (3,600 each: 60 fps).
		{vid, jobstate.OperationEmbed, mediakind.Info{Duration: 10 * time.Minute, Frames: 18_000}, 50},
		{vid, jobstate.OperationEmbed, mediakind.Info{Duration: time.Minute, Frames: 3600}, 5},
		{vid, jobstate.OperationEmbed, mediakind.Info{Duration: time.Minute, Frames: 3601}, 10},
		{vid, jobstate.OperationEmbed, mediakind.Info{Duration: time.Second, Frames: 36_000}, 50},
		{vid, jobstate.OperationEmbed, mediakind.Info{Duration: 0, Frames: 7201}, 15},
		{img, jobstate.OperationDetect, mediakind.Info{}, 7},
		{pdf, jobstate.OperationDetect, mediakind.Info{Pages: 40}, 7},
		{vid, jobstate.OperationDetect, mediakind.Info{Duration: 10 * time.Minute}, 7},
	}
	for _, c := range cases {
		if got := c.k.Price(c.op, r, c.info); got != c.want {
			t.Errorf("%s %s %+v: price %d, want %d", c.k.Media, c.op, c.info, got, c.want)
		}
	}
}

// TestVideoFramesPaid: the frames a video's price pays for are its priced minutes' frames, at the catalog's
// frames per minute (3,600 when unset): an embed decodes no more (mediafiles.NewVideo).
func TestVideoFramesPaid(t *testing.T) {
	def := mediakind.Rates{VideoEmbedPerMinute: 1}
	custom := mediakind.Rates{VideoEmbedPerMinute: 2, VideoFramesPerMinute: 10}
	vid := mustKind(t, jobstate.MediaVideo)
	cases := []struct {
		r                 mediakind.Rates
		info              mediakind.Info
		minutes, paid, pr int64
	}{
		{def, mediakind.Info{Duration: time.Second, Frames: 10}, 1, 3600, 1},
		{def, mediakind.Info{Duration: 90 * time.Second, Frames: 2700}, 2, 7200, 2},
		{def, mediakind.Info{Duration: time.Second, Frames: 36_000}, 10, 36_000, 10},
		{custom, mediakind.Info{Duration: time.Second, Frames: 40}, 4, 40, 8},
		{custom, mediakind.Info{Duration: time.Second, Frames: 41}, 5, 50, 10},
		{custom, mediakind.Info{Duration: 2 * time.Minute, Frames: 5}, 2, 20, 4},
	}
	for _, c := range cases {
		m, paid, pr := mediakind.VideoMinutes(c.r, c.info), mediakind.VideoFramesPaid(c.r, c.info),
			vid.Price(jobstate.OperationEmbed, c.r, c.info)
		if m != c.minutes || paid != c.paid || pr != c.pr {
			t.Errorf("%+v at %+v: %d minutes, %d frames paid, price %d; want %d, %d, %d", c.info, c.r, m, paid, pr,
				c.minutes, c.paid, c.pr)
		}
	}
}

func TestByFilename(t *testing.T) {
	cases := map[string]jobstate.Media{
		"a.JPG": jobstate.MediaImage, "x/y.tiff": jobstate.MediaImage, "doc.pdf": jobstate.MediaDocument,
		"clip.MOV": jobstate.MediaVideo, "clip.m4v": jobstate.MediaVideo,
	}
	for name, want := range cases {
		k, ok := mediakind.ByFilename(name)
		if !ok || k.Media != want {
			t.Errorf("%s: %v %v, want %s", name, k.Media, ok, want)
		}
	}
	for _, name := range []string{"", "noext", "a.exe", "a.pdf.zip"} {
		if k, ok := mediakind.ByFilename(name); ok {
			t.Errorf("%s: found %s", name, k.Media)
		}
	}
}

// TestInputExt: the extension a source named without one gets, per detected format (as the probes name them).
func TestInputExt(t *testing.T) {
	cases := []struct {
		media        jobstate.Media
		format, want string
	}{
		{jobstate.MediaImage, "JPEG", "jpg"}, {jobstate.MediaImage, "PNG", "png"}, {jobstate.MediaImage, "WEBP", "webp"},
		{jobstate.MediaImage, "TIFF", "tiff"}, {jobstate.MediaImage, "PNM", "pnm"}, {jobstate.MediaDocument, "PDF", "pdf"},
		{jobstate.MediaVideo, "MP4", "mp4"}, {jobstate.MediaVideo, "MOV", "mov"},
	}
	for _, c := range cases {
		k, _ := mediakind.ByMedia(c.media)
		if got := k.InputExt(c.format); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.media, c.format, got, c.want)
		}
	}
}

// TestEveryJobMediaHasARow: the job state machine's media kinds and the table agree.
func TestEveryJobMediaHasARow(t *testing.T) {
	for _, m := range []jobstate.Media{jobstate.MediaImage, jobstate.MediaDocument, jobstate.MediaVideo} {
		mustKind(t, m)
	}
	for _, k := range mediakind.Table() {
		if _, err := jobstate.ParseMedia(string(k.Media)); err != nil {
			t.Errorf("row %s: %v", k.Media, err)
		}
	}
}

// TestREADMEMatchesTable: README.md's "Media kinds" table is the one the table renders (prices at the
// default rates of one credit). Regenerate it with FILIGRANE_UPDATE_README=1.
func TestREADMEMatchesTable(t *testing.T) {
	const path = "../../README.md"
	const begin, end = "<!-- media kinds: begin (generated by actors/mediakind) -->\n", "<!-- media kinds: end -->\n"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("README.md has no generated media kinds table between %q and %q", begin, end)
	}
	want := mediakind.LimitsMarkdown()
	if got := s[i+len(begin) : j]; got != want {
		if os.Getenv("FILIGRANE_UPDATE_README") == "1" {
			if err := os.WriteFile(path, []byte(s[:i+len(begin)]+want+s[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatalf("README.md's media kinds table differs from the table; run FILIGRANE_UPDATE_README=1 go test ./actors/mediakind\ngot:\n%s\nwant:\n%s", got, want)
	}
}

// TestWorkClasses: images and documents are short CPU work, videos long CPU work; accelerator=gpu prefers
// the gpu class and falls back to the kind's CPU class.
func TestWorkClasses(t *testing.T) {
	cases := []struct {
		media jobstate.Media
		acc   jobstate.Accelerator
		want  []mediakind.Class
	}{
		{jobstate.MediaImage, jobstate.AcceleratorCPU, []mediakind.Class{mediakind.ClassCPU}},
		{jobstate.MediaDocument, "", []mediakind.Class{mediakind.ClassCPU}},
		{jobstate.MediaVideo, jobstate.AcceleratorCPU, []mediakind.Class{mediakind.ClassCPULong}},
		{jobstate.MediaVideo, jobstate.AcceleratorGPU, []mediakind.Class{mediakind.ClassGPU, mediakind.ClassCPULong}},
		{jobstate.MediaImage, jobstate.AcceleratorGPU, []mediakind.Class{mediakind.ClassGPU, mediakind.ClassCPU}},
	}
	for _, c := range cases {
		if got := mediakind.ClassesFor(c.media, c.acc); !slices.Equal(got, c.want) {
			t.Errorf("%s/%s: %v, want %v", c.media, c.acc, got, c.want)
		}
	}
	for _, k := range mediakind.Table() {
		if !slices.Contains(mediakind.Classes(), k.Class) {
			t.Errorf("%s has work class %q", k.Media, k.Class)
		}
	}
}
