package loadbench

// The document and video operations (embed_pdf, embed_video): their inputs, made once per run, the check of
// their results, and the check of what the ledger charged them.

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"time"

	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
	"filigrane/bench/apibench"
	"filigrane/codec/pdf/pdftest"
)

// PDFPages is the page count of the generated document embed_pdf sends (a document is charged per file,
// whatever its pages: the page count only makes the job longer).
const PDFPages = 3

// The clip embed_video sends: testsrc2 at VideoSize, VideoFPS frames a second, VideoSeconds long (unless
// Config.VideoSeconds says otherwise), H.264 in
// MP4, made with ffmpeg once per run. It starts one minute: the service charges it one video minute. Its job
// takes 2-4 s on the loaded 2-core machine: long enough for a chaos action to land while ffmpeg runs. 320x240
// because detect_video must find the mark: a 176x144 clip is accepted (the short side is over 128) and marked,
// but the codec does not read the mark back from it (`filigrane codec detect`: watermarked false).
const (
	VideoSize    = "320x240"
	VideoFPS     = 25
	VideoSeconds = 6
)

// isMedia says whether the operation embeds or detects a document or a video.
func (o Op) isMedia() bool {
	switch o {
	case OpEmbedPDF, OpEmbedVideo, OpDetectPDF, OpDetectVideo, OpUploadVideo, OpVideoStorage:
		return true
	}
	return false
}

// mediaInputs prepares the files of the document and video operations the mix names.
func (r *runner) mediaInputs(ctx context.Context) error {
	batchMedia := r.cfg.Mix[OpBatchMedia] > 0 || r.cfg.Mix[OpBatchMediaCancel] > 0
	if r.cfg.Mix[OpEmbedPDF] > 0 || batchMedia || r.cfg.Mix[OpDetectPDF] > 0 {
		r.pdfFile = pdftest.Make(pdftest.Doc{Pages: PDFPages})
		b, err := apibench.MultipartBody(r.pdfFile, "bench.pdf", r.cfg.Data)
		if err != nil {
			return err
		}
		r.pdfBody = &bodyParts{ContentType: b.ContentType, Data: b.Data}
	}
	if r.cfg.Mix[OpEmbedVideo] > 0 || batchMedia || r.cfg.Mix[OpDetectVideo] > 0 || r.cfg.Mix[OpUploadVideo] > 0 ||
		r.cfg.Mix[OpVideoStorage] > 0 {
		clip, err := makeClip(ctx, r.videoSeconds())
		if err != nil {
			return err
		}
		r.clipFile = clip
		b, err := apibench.MultipartBody(clip, "bench.mp4", r.cfg.Data)
		if err != nil {
			return err
		}
		r.videoBody = &bodyParts{ContentType: b.ContentType, Data: b.Data}
	}
	return nil
}

// videoSeconds is the clip's length.
func (r *runner) videoSeconds() int {
	if r.cfg.VideoSeconds > 0 {
		return r.cfg.VideoSeconds
	}
	return VideoSeconds
}

// makeClip runs ffmpeg once for embed_video's clip, seconds long.
func makeClip(ctx context.Context, seconds int) ([]byte, error) {
	bin, err := exec.LookPath("ffmpeg")
	if err != nil {
		return nil, fmt.Errorf("embed_video needs ffmpeg on PATH to make its clip: %w", err)
	}
	dir, err := os.MkdirTemp("", "loadbench-clip-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "clip.mp4")
	src := fmt.Sprintf("testsrc2=size=%s:rate=%d:duration=%d", VideoSize, VideoFPS, seconds)
	cmd := exec.CommandContext(ctx, bin, "-nostdin", "-v", "error", "-f", "lavfi", "-i", src,
		"-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-movflags", "+faststart", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("make the embed_video clip with ffmpeg: %w: %s", err, bytes.TrimSpace(msg))
	}
	return os.ReadFile(out)
}

// mediaRoute is where op's file is sent, its body, and what its result must be: its content type and the
// bytes its file starts with at offset magicAt.
func (r *runner) mediaRoute(op Op) (path string, body *bodyParts, ctype string, magic []byte, magicAt int) {
	if op == OpEmbedPDF {
		return "/watermarks/documents/async", r.pdfBody, "application/pdf", []byte("%PDF-"), 0
	}
	return "/watermarks/videos/async", r.videoBody, "video/mp4", []byte("ftyp"), 4 // ISO BMFF: size, then "ftyp"
}

// embedMedia submits a document or video embed (body to path), follows the job to its end and downloads its result: the
// operation succeeds when the marked file has the kind's type, starts as one and names its watermark. A
// succeeded job is charged whatever its download gives, so the success is booked for the credits check first.
func (a *attempt) embedMedia(ctx context.Context, body *bodyParts, path string) {
	_, _, ctype, magic, at := a.r.mediaRoute(a.op)
	if !a.submitAsyncBody(ctx, path, body) || !a.out.ok {
		return
	}
	res := a.jobResult(ctx)
	if res == nil {
		return
	}
	if f := checkMediaResult(res, ctype, magic, at); f != "" {
		a.out.failure, a.out.sample = f, snippet(res.body)
		return
	}
	a.result = res.body
	a.out.ok = true
}

// jobResult books the succeeded job of a.out.requestID for the credits check (it is charged whatever its
// download gives) and downloads its result: the 200 response, or nil with the attempt's failure set.
func (a *attempt) jobResult(ctx context.Context) *response {
	a.r.jobs.success(a.out.requestID, a.op)
	res, ok := a.send(ctx, "GET", "/watermarks/jobs/"+url.PathEscape(a.out.requestID)+"/result", "", nil, true)
	a.out.ok = false
	switch {
	case !ok:
		if res != nil {
			a.out.failure = "result " + res.failureKey()
		}
	case res.status != 200:
		a.out.failure, a.out.sample = "result "+res.failureKey(), snippet(res.body)
	default:
		return res
	}
	return nil
}

// checkMediaResult says what is wrong with a 200 result, or "".
func checkMediaResult(res *response, ctype string, magic []byte, at int) string {
	switch {
	case res.contentType != ctype:
		return "result type " + res.contentType
	case len(res.body) < at+len(magic) || !bytes.Equal(res.body[at:at+len(magic)], magic):
		return "result not a " + ctype + " file"
	case res.watermarkID == "":
		return "result without X-Watermark-ID"
	}
	return ""
}

// mediaCharges checks the document and video operations the client saw succeed against the catalog's prices
// (mediakind's rules: a document its rate per file, a video its rate per priced minute of the clip, a
// detection the detect rate whatever the kind). It
// returns how many were checked and those charged otherwise; without prices (running nodes whose catalog the
// harness does not know) nothing is checked.
func (r *runner) mediaCharges(seen map[string]Op, amounts map[string]int64) (checked int, wrong []string) {
	p := r.cfg.Prices
	if p == nil {
		return 0, nil
	}
	for id, op := range seen {
		a, charged := amounts[id]
		if !op.isMedia() || !charged {
			continue // one not charged is the set comparison's finding
		}
		want := p.DocumentEmbed
		switch op {
		case OpEmbedVideo, OpUploadVideo, OpVideoStorage:
			// The clip's duration and frames, priced by the media-kind table's rule (frames count where they are
			// more than the started minutes pay for).
			video, _ := mediakind.ByMedia(jobstate.MediaVideo)
			want = video.Price(jobstate.OperationEmbed, *p, mediakind.Info{
				Duration: time.Duration(r.videoSeconds()) * time.Second, Frames: r.videoSeconds() * VideoFPS})
		case OpDetectPDF, OpDetectVideo:
			want = p.Detect
		}
		checked++
		if a != want {
			wrong = append(wrong, id+" ("+string(op)+") charged "+strconv.FormatInt(a, 10)+", want "+strconv.FormatInt(want, 10))
		}
	}
	sort.Strings(wrong)
	return checked, wrong
}

// setupMarkedMedia marks the document and the clip once, for the detections the mix names.
func (r *runner) setupMarkedMedia(ctx context.Context) error {
	for _, k := range []struct {
		detect, embed Op
		name          string
		dst           **bodyParts
	}{{OpDetectPDF, OpEmbedPDF, "marked.pdf", &r.markedPDF}, {OpDetectVideo, OpEmbedVideo, "marked.mp4", &r.markedClip}} {
		if r.cfg.Mix[k.detect] == 0 {
			continue
		}
		a := &attempt{r: r, op: k.embed, idem: fmt.Sprintf("%s-setup-%s", r.runID, k.embed), giveUp: time.Now().Add(r.cfg.RetryFor)}
		a.out.op, a.out.start = k.embed, time.Now()
		path, body, _, _, _ := r.mediaRoute(k.embed)
		a.embedMedia(ctx, body, path)
		a.out.end = time.Now()
		r.rec.record(a.out)
		if !a.out.ok {
			return fmt.Errorf("set-up: %s for %s failed: %s %s", k.embed, k.detect, a.out.failure, a.out.sample)
		}
		b, err := apibench.MultipartBody(a.result, k.name, "")
		if err != nil {
			return err
		}
		*k.dst = &bodyParts{ContentType: b.ContentType, Data: b.Data}
	}
	return nil
}

// watermarkedTrue finds a detection result that found the mark.
var watermarkedTrue = regexp.MustCompile(`"watermarked"\s*:\s*true`)

// detectMedia runs a detection of the marked document (synchronous: answered in the request, or a 202
// receipt followed to its end) or clip (a job), and checks that the result found the mark.
func (a *attempt) detectMedia(ctx context.Context) {
	path, body := "/watermarks/documents/detect", a.r.markedPDF
	if a.op == OpDetectVideo {
		path, body = "/watermarks/videos/detect/async", a.r.markedClip
	}
	res, ok := a.send(ctx, "POST", path, body.ContentType, body.Data, true)
	if !ok {
		return
	}
	switch {
	case res.status == 200 && a.op == OpDetectPDF:
		a.out.requestID = res.requestID
		a.r.jobs.success(a.out.requestID, a.op) // answered: charged, found or not
		if watermarkedTrue.Match(res.body) {
			a.out.ok = true
		} else {
			a.out.failure, a.out.sample = "detection did not find the mark", snippet(res.body)
		}
		return
	case res.status == 202:
		a.accepted(ctx, res)
	default:
		a.fail(res)
		return
	}
	if !a.out.ok {
		return
	}
	if res = a.jobResult(ctx); res == nil {
		return
	}
	if !watermarkedTrue.Match(res.body) {
		a.out.failure, a.out.sample = "detection did not find the mark", snippet(res.body)
		return
	}
	a.out.ok = true
}
