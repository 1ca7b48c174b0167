package actors_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/actors/jobstate"
	"filigrane/actors/mediafiles"
	"filigrane/actors/mediakind"
	"filigrane/codec"
	"filigrane/persistence/fsblobs"
)

// copyAdapter stands for a file-path codec adapter (codec/video, codec/pdf): it writes the input's bytes
// behind a header to dst, refuses inputs starting with "bad", and reports the duration it was built with.
// It records the paths it was given so that the test can check they are gone afterwards.
type copyAdapter struct {
	duration time.Duration
	seen     *[]string
	// decoded, when set, is the frames the embed reports processed (the probe declares 10).
	decoded int
}

func (a copyAdapter) Probe(ctx context.Context, src string) (mediakind.Info, error) {
	return mediakind.Info{Format: "MP4", Frames: 10, Duration: a.duration}, nil
}

func (a copyAdapter) Embed(ctx context.Context, src, dst string, id codec.ID) (mediakind.Report, error) {
	*a.seen = append(*a.seen, src, dst)
	in, err := os.ReadFile(src)
	if err != nil {
		return mediakind.Report{}, err
	}
	if bytes.HasPrefix(in, []byte("bad")) {
		return mediakind.Report{}, &mediakind.Refusal{Code: "invalid_video", Detail: "not a video we can read"}
	}
	out := append([]byte("marked:"+id.String()+":"), in...)
	if err := os.WriteFile(dst, out, 0o600); err != nil {
		return mediakind.Report{}, err
	}
	info, _ := a.Probe(ctx, src)
	if a.decoded > 0 {
		info.Frames = a.decoded
	}
	return mediakind.Report{Info: info, Units: info.Frames, Bytes: int64(len(out))}, nil
}

func (a copyAdapter) Detect(ctx context.Context, src string) (codec.Detection, error) {
	*a.seen = append(*a.seen, src)
	in, err := os.ReadFile(src)
	if err != nil {
		return codec.Detection{}, err
	}
	id := string(bytes.SplitN(in, []byte(":"), 3)[1])
	return codec.Detection{Watermarked: true, Confidence: 1, WatermarkID: &id, Units: []codec.Unit{{Index: 0, Watermarked: true}}}, nil
}

func videoJob(t *testing.T, op jobstate.Operation, key string, size int64) *jobstate.Record {
	t.Helper()
	s := jobstate.Spec{RequestID: "req_" + strings.Repeat("a", 64), OrgID: "org_1", Operation: op, Media: jobstate.MediaVideo,
		Format: "MP4", FrameCount: 10, AcceleratorRequested: jobstate.AcceleratorCPU, CreditsHeld: 9,
		Input: jobstate.Input{BlobKey: key, SHA256: strings.Repeat("b", 64), Size: size, Filename: "clip.mp4", ContentType: "video/mp4"}}
	if op == jobstate.OperationEmbed {
		s.WatermarkID = strings.Repeat("c", 64)
	}
	rec, err := jobstate.Accept(s, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func newFileMedia(t *testing.T, a mediakind.Adapter) (actors.Media, string) {
	t.Helper()
	blobs, err := fsblobs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	cat := actors.DefaultCatalog()
	cat.Prices.VideoEmbedPerMinute = 3
	return actors.Media{Blobs: blobs, Catalog: cat, TempDir: tmp,
		Files: map[jobstate.Media]mediakind.Adapter{jobstate.MediaVideo: a}}, tmp
}

func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
}

// TestProcessFileEmbedAndDetect runs a video embed and a detection of its output through the generic
// processor: the output is stored with the kind's MIME type and name, priced per started minute, and no
// temporary file is left.
func TestProcessFileEmbedAndDetect(t *testing.T) {
	ctx := context.Background()
	var seen []string
	m, tmp := newFileMedia(t, copyAdapter{duration: 61 * time.Second, seen: &seen})
	if _, err := m.Blobs.Put(ctx, "inputs/clip", strings.NewReader("frames")); err != nil {
		t.Fatal(err)
	}
	embed := videoJob(t, jobstate.OperationEmbed, "inputs/clip", 6)
	out, perr := m.Process(ctx, embed)
	if perr != nil {
		t.Fatal(perr)
	}
	if keys := actors.OutputKeys(embed); !slices.Contains(keys, out.BlobKey) {
		t.Fatalf("the output is stored under %s, not among the keys a failed job purges: %v", out.BlobKey, keys)
	}
	if out.ContentType != "video/mp4" || out.Filename != "clip-watermarked.mp4" || out.Charge != 6 {
		t.Fatalf("output %+v; want video/mp4, clip-watermarked.mp4, 2 started minutes at 3 credits", out)
	}
	r, err := m.Blobs.Get(ctx, out.BlobKey, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r)
	r.Close()
	want := "marked:" + strings.Repeat("c", 64) + ":frames"
	if string(body) != want || out.Size != int64(len(want)) {
		t.Fatalf("stored %q (%d), want %q", body, out.Size, want)
	}
	assertEmptyDir(t, tmp)

	detect := videoJob(t, jobstate.OperationDetect, out.BlobKey, out.Size)
	det, perr := m.Process(ctx, detect)
	if perr != nil {
		t.Fatal(perr)
	}
	if keys := actors.OutputKeys(detect); !slices.Contains(keys, det.BlobKey) {
		t.Fatalf("the detection is stored under %s, not among the keys a failed job purges: %v", det.BlobKey, keys)
	}
	if det.ContentType != "application/json" || det.Charge != m.Catalog.Prices.Detect {
		t.Fatalf("detection output %+v", det)
	}
	r, err = m.Blobs.Get(ctx, det.BlobKey, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	var got codec.Detection
	if err := json.NewDecoder(r).Decode(&got); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if !got.Watermarked || got.WatermarkID == nil || *got.WatermarkID != strings.Repeat("c", 64) {
		t.Fatalf("detection %+v", got)
	}
	assertEmptyDir(t, tmp)
	for _, p := range seen {
		if !strings.HasPrefix(p, tmp) {
			t.Errorf("adapter got %s, outside the processor's temporary directory", p)
		}
	}
}

// TestEmbedChargeWithinTheDeclaredPrice: a video embed is charged for the frames it processed, at most the
// price of the frames its probe declared at acceptance (the record's frame count, which the hold was priced
// on), and at most the hold: 3 credits a minute, 3,600 frames a minute. A one-second clip that declared 7,201
// frames and processed 10 pays one minute; one that declared 10 and processed 7,201 pays the one minute held
// for it, where the processed frames' price (3 minutes) was charged before, against a hold of one; a hold
// taken at lower prices (3 credits for what now costs 9) caps the charge, which the record would refuse above
// it.
func TestEmbedChargeWithinTheDeclaredPrice(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		declared, decoded int
		held, want        int64
	}{
		{declared: 7201, decoded: 10, held: 9, want: 3},
		{declared: 10, decoded: 7201, held: 3, want: 3},
		{declared: 7201, decoded: 7201, held: 9, want: 9},
		{declared: 7201, decoded: 7201, held: 3, want: 3},
	} {
		var seen []string
		m, _ := newFileMedia(t, copyAdapter{duration: time.Second, decoded: c.decoded, seen: &seen})
		if _, err := m.Blobs.Put(ctx, "inputs/clip", strings.NewReader("frames")); err != nil {
			t.Fatal(err)
		}
		rec := videoJob(t, jobstate.OperationEmbed, "inputs/clip", 6)
		rec.FrameCount, rec.CreditsHeld = c.declared, c.held
		out, perr := m.Process(ctx, rec)
		if perr != nil {
			t.Fatal(perr)
		}
		if out.Charge != c.want {
			t.Errorf("declared %d frames, processed %d, %d held: charge %d, want %d", c.declared, c.decoded, c.held,
				out.Charge, c.want)
		}
	}
}

// TestProcessFileRefusals: a refused input fails the job with the adapter's code (not retried), an input
// over the kind's limit fails with file_too_large before the adapter runs, a kind without adapter is refused;
// no temporary file is left on any path.
func TestProcessFileRefusals(t *testing.T) {
	ctx := context.Background()
	var seen []string
	m, tmp := newFileMedia(t, copyAdapter{seen: &seen})
	if _, err := m.Blobs.Put(ctx, "inputs/bad", strings.NewReader("bad bytes")); err != nil {
		t.Fatal(err)
	}
	_, perr := m.Process(ctx, videoJob(t, jobstate.OperationEmbed, "inputs/bad", 9))
	if perr == nil || perr.Code != "invalid_video" || perr.Retryable {
		t.Fatalf("refused input: %+v", perr)
	}
	assertEmptyDir(t, tmp)

	kind, _ := mediakind.ByMedia(jobstate.MediaVideo)
	limit := kind.MaxInput(jobstate.OperationEmbed)
	if _, err := m.Blobs.Put(ctx, "inputs/big", io.LimitReader(zeros{}, limit+1)); err != nil {
		t.Fatal(err)
	}
	seen = seen[:0]
	_, perr = m.Process(ctx, videoJob(t, jobstate.OperationEmbed, "inputs/big", limit+1))
	if perr == nil || perr.Code != actors.CodeFileTooLarge || perr.Retryable || len(seen) != 0 {
		t.Fatalf("over the limit: %+v (adapter saw %v)", perr, seen)
	}
	assertEmptyDir(t, tmp)

	_, perr = m.Process(ctx, videoJob(t, jobstate.OperationEmbed, "inputs/missing", 1))
	if perr == nil || !perr.Retryable {
		t.Fatalf("missing input: %+v, want a retryable error", perr)
	}
	assertEmptyDir(t, tmp)

	m.Files = nil
	if m.Supports(jobstate.MediaVideo) || !m.Supports(jobstate.MediaImage) {
		t.Fatal("Supports disagrees with the adapters")
	}
	_, perr = m.Process(ctx, videoJob(t, jobstate.OperationEmbed, "inputs/bad", 9))
	if perr == nil || perr.Code != actors.CodeProcessingError {
		t.Fatalf("no adapter: %+v", perr)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestImagePixelLimitsMatchTable: the image decoder's bounds are the table's.
func TestImagePixelLimitsMatchTable(t *testing.T) {
	k, _ := mediakind.ByMedia(jobstate.MediaImage)
	if k.MaxPixels(jobstate.OperationEmbed) != actors.MaxImagePixels || k.MaxPixels(jobstate.OperationDetect) != actors.MaxDetectPixels {
		t.Fatalf("table %d/%d, decoder %d/%d", k.MaxPixels(jobstate.OperationEmbed), k.MaxPixels(jobstate.OperationDetect),
			actors.MaxImagePixels, actors.MaxDetectPixels)
	}
}

// TestMissingProgramFailsTheJobAtOnce: with ffmpeg or mutool absent (the real adapters pointed at a path
// that does not exist), the edge's check and the job both answer media_unavailable, which is not retried: the
// job fails once, and its held credits are released as for any failure.
func TestMissingProgramFailsTheJobAtOnce(t *testing.T) {
	ctx := context.Background()
	missing := t.TempDir() + "/not-installed"
	cdc, err := codec.New([]byte(codec.DevelopmentKey))
	if err != nil {
		t.Fatal(err)
	}
	vid := mediafiles.NewVideo(cdc, actors.DefaultCatalog().Prices, 0)
	vid.A.FFmpeg, vid.A.FFprobe = missing, missing
	doc := mediafiles.NewPDF(cdc)
	doc.A.Mutool = missing
	m, tmp := newFileMedia(t, vid)
	m.Files[jobstate.MediaDocument] = doc
	for _, media := range []jobstate.Media{jobstate.MediaVideo, jobstate.MediaDocument} {
		for _, op := range []jobstate.Operation{jobstate.OperationEmbed, jobstate.OperationDetect} {
			perr := m.Available(media, op)
			if perr == nil || perr.Code != actors.CodeMediaUnavailable || perr.Retryable || !strings.Contains(perr.Detail, "not installed") {
				t.Errorf("%s %s: Available = %+v, want media_unavailable", media, op, perr)
			}
		}
	}
	if _, err := m.Blobs.Put(ctx, "inputs/clip", strings.NewReader("frames")); err != nil {
		t.Fatal(err)
	}
	for _, op := range []jobstate.Operation{jobstate.OperationEmbed, jobstate.OperationDetect} {
		_, perr := m.Process(ctx, videoJob(t, op, "inputs/clip", 6))
		if perr == nil || perr.Code != actors.CodeMediaUnavailable || perr.Retryable || !strings.Contains(perr.Detail, "ffmpeg is not installed") {
			t.Fatalf("video %s without ffmpeg: %+v, want media_unavailable, not retried", op, perr)
		}
	}
	assertEmptyDir(t, tmp)

	// The same adapters with the programs installed are available.
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Fatal("ffmpeg is not installed (scripts/setup.sh installs it)")
	}
	if _, err := exec.LookPath("mutool"); err != nil {
		t.Fatal("mutool is not installed (scripts/setup.sh installs it)")
	}
	vid.A.FFmpeg, vid.A.FFprobe, doc.A.Mutool = "", "", ""
	for _, media := range []jobstate.Media{jobstate.MediaVideo, jobstate.MediaDocument} {
		if perr := m.Available(media, jobstate.OperationDetect); perr != nil {
			t.Errorf("%s with its program installed: %+v", media, perr)
		}
	}
}
