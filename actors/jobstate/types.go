package jobstate

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"filigrane/internal/problem"
)

// Status is a job's status as the API shows it (spec 3.1).
type Status string

// The job statuses of spec 3.1.
const (
	StatusQueued    Status = "queued"
	StatusRunning   Status = "running"
	StatusRetrying  Status = "retrying"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
)

// Terminal reports whether s is a final status; a terminal record never changes status again.
func (s Status) Terminal() bool { return s == StatusSucceeded || s == StatusFailed }

// Active reports whether s is a status a job can still leave.
func (s Status) Active() bool { return s == StatusQueued || s == StatusRunning || s == StatusRetrying }

func (s Status) valid() bool { return s.Active() || s.Terminal() }

// Operation is what the job does to its input.
type Operation string

// Operations.
const (
	OperationEmbed  Operation = "embed"
	OperationDetect Operation = "detect"
)

// ParseOperation validates an operation name.
func ParseOperation(s string) (Operation, error) {
	switch o := Operation(s); o {
	case OperationEmbed, OperationDetect:
		return o, nil
	}
	return "", fmt.Errorf("unknown operation %q (want embed or detect): %w", s, ErrInvalid)
}

// Media is the kind of file a job works on; it picks the deadline and the status URL's resource.
type Media string

// Media kinds, named as in the asset record's media_type (spec 2.6).
const (
	MediaImage    Media = "image"
	MediaDocument Media = "document"
	MediaVideo    Media = "video"
)

// ParseMedia validates a media kind.
func ParseMedia(s string) (Media, error) {
	switch m := Media(s); m {
	case MediaImage, MediaDocument, MediaVideo:
		return m, nil
	}
	return "", fmt.Errorf("unknown media %q (want image, document or video): %w", s, ErrInvalid)
}

// Accelerator is a processor kind: what the client asked for, or what ran.
type Accelerator string

// Accelerators.
const (
	AcceleratorCPU Accelerator = "cpu"
	AcceleratorGPU Accelerator = "gpu"
)

// ParseAccelerator validates the accelerator query parameter; empty means the default, cpu.
func ParseAccelerator(s string) (Accelerator, error) {
	switch a := Accelerator(s); a {
	case "":
		return AcceleratorCPU, nil
	case AcceleratorCPU, AcceleratorGPU:
		return a, nil
	}
	return "", fmt.Errorf("unknown accelerator %q (want cpu or gpu): %w", s, ErrInvalid)
}

// OutputFormat is the file format of an image embed's output. The zero value is PNG, the default: records
// written before the option existed read as PNG, and a PNG request fingerprints as it did before.
type OutputFormat string

// Output formats of image embeds (codec/markfile writes them).
const (
	OutputPNG  OutputFormat = "png"
	OutputJPEG OutputFormat = "jpeg"
	OutputWebP OutputFormat = "webp"
)

// ParseOutputFormat validates the output_format option, case-insensitively: empty and png are PNG, jpeg and
// jpg are JPEG, webp is WebP.
func ParseOutputFormat(s string) (OutputFormat, error) {
	switch strings.ToLower(s) {
	case "", "png":
		return OutputPNG, nil
	case "jpeg", "jpg":
		return OutputJPEG, nil
	case "webp":
		return OutputWebP, nil
	}
	return "", fmt.Errorf("unknown output format %q (want png, jpeg or webp): %w", s, ErrInvalid)
}

// OrPNG is f with the zero value spelled png.
func (f OutputFormat) OrPNG() OutputFormat {
	if f == "" {
		return OutputPNG
	}
	return f
}

// stored is how f is kept on a record and in a spec's fingerprint: empty for PNG, so that records and
// fingerprints of PNG requests stay byte for byte what they were before the option existed.
func (f OutputFormat) stored() OutputFormat {
	if f == OutputPNG {
		return ""
	}
	return f
}

// Token is a lease's fencing token: the record's epoch at the claim that granted the lease. Epochs increase on
// every claim, so a token from an earlier lease never matches again.
type Token uint64

// Lease is a worker's exclusive, renewable claim on the job's current attempt.
type Lease struct {
	WorkerID  string        `msgpack:"worker_id"`
	Token     Token         `msgpack:"token"`
	ClaimedAt time.Time     `msgpack:"claimed_at"`
	ExpiresAt time.Time     `msgpack:"expires_at"`
	Duration  time.Duration `msgpack:"duration"` // what each Renew extends the lease by
}

// Input is the original file, kept for every attempt: retries start from it, never from a partial output.
type Input struct {
	BlobKey     string `msgpack:"blob_key"`
	SHA256      string `msgpack:"sha256"` // lowercase hex of the stored bytes
	Size        int64  `msgpack:"size"`
	Filename    string `msgpack:"filename"`
	ContentType string `msgpack:"content_type"`
}

// Output is everything that belongs to a successful outcome: the result blob, the asset records to create and
// the charge. It is written once, with the terminal status, as the job's single commit point (DESIGN.md rule 3).
// All fields are comparable so that a duplicated Succeed can be recognised by equality.
type Output struct {
	BlobKey     string `msgpack:"blob_key"`
	Size        int64  `msgpack:"size"`
	SHA256      string `msgpack:"sha256"`
	ContentType string `msgpack:"content_type"`
	Filename    string `msgpack:"filename"`
	// AssetID and SourceAssetID name the watermarked and source asset records an embed creates; empty for
	// detection, which creates no assets.
	AssetID       string `msgpack:"asset_id"`
	SourceAssetID string `msgpack:"source_asset_id"`
	// WatermarkID must repeat the record's watermark id for an embed (a guard against a worker marking with
	// anything else) and be empty for detection, whose findings live in the result blob.
	WatermarkID string `msgpack:"watermark_id"`
	// Detection is a detection's findings as compact JSON (see DetectionSummary), kept on the record so that
	// the job's webhook event carries them with the same bytes on every attempt and redelivery, even after
	// the result file expired. Empty for an embed. A string, not a struct, so that Output stays comparable.
	Detection string `msgpack:"detection,omitempty"`
	// Charge is the actual price, at most the credits held (normal price when a GPU request ran on CPU).
	Charge      int64       `msgpack:"charge"`
	Accelerator Accelerator `msgpack:"accelerator"`
	// Media and SourceMedia describe the watermarked file and its source for their asset records (an embed's
	// only; a video's output frames can be a pixel larger than its source's, odd sizes being padded).
	Media       MediaInfo `msgpack:"media"`
	SourceMedia MediaInfo `msgpack:"source_media"`
	// Units are a video embed's units (one per second of frames) as the JSON array the receipt shows
	// (EncodeEmbedUnits); empty for other embeds, for detection, and in records written before embeds had
	// units. A string, not a slice, so that Output stays comparable.
	Units string `msgpack:"units,omitempty"`
}

// EmbedUnit is one unit of an embed's receipt: a video's segment, its span on the video's timeline in seconds
// and its frames (the same segments as the detection units of a video, codec/video.Segment).
type EmbedUnit struct {
	Index     int     `json:"index"`
	StartTime float64 `json:"start_time"`
	EndTime   float64 `json:"end_time"`
	Frames    int     `json:"frames"`
}

// MaxEmbedUnits bounds the units an embed records: a video is at most 10 minutes, one unit per second (the
// last one can start in the last second), with room to spare.
const MaxEmbedUnits = 1000

// EncodeEmbedUnits is Output.Units for units: "" for none, else their JSON array.
func EncodeEmbedUnits(units []EmbedUnit) (string, error) {
	if len(units) == 0 {
		return "", nil
	}
	if len(units) > MaxEmbedUnits {
		return "", fmt.Errorf("%d embed units, at most %d", len(units), MaxEmbedUnits)
	}
	b, err := json.Marshal(units)
	if err != nil {
		return "", fmt.Errorf("encode embed units: %w", err)
	}
	return string(b), nil
}

// EmbedUnits decodes Output.Units; nil when there are none (or, never expected, when they do not decode).
func (o *Output) EmbedUnits() []EmbedUnit {
	if o == nil || o.Units == "" {
		return nil
	}
	var units []EmbedUnit
	if json.Unmarshal([]byte(o.Units), &units) != nil {
		return nil
	}
	return units
}

// MediaInfo is what an asset record tells of its file beyond bytes and format: the pixel size of an image or
// a video's frames, a document's pages, a video's frames and duration. Zero where it does not apply.
type MediaInfo struct {
	Width      int   `msgpack:"width,omitempty"`
	Height     int   `msgpack:"height,omitempty"`
	Pages      int   `msgpack:"pages,omitempty"`
	Frames     int64 `msgpack:"frames,omitempty"`
	DurationMS int64 `msgpack:"duration_ms,omitempty"`
}

// AttemptError is how the latest failed attempt ended; it stays on the record through later attempts.
type AttemptError struct {
	Token     Token     `msgpack:"token"`
	Code      string    `msgpack:"code"`
	Detail    string    `msgpack:"detail"`
	Retryable bool      `msgpack:"retryable"`
	At        time.Time `msgpack:"at"`
}

// Settlement records which effects of the terminal record have been carried out (see PendingEffects).
type Settlement struct {
	AssetsWritten    bool `msgpack:"assets_written"`
	CreditsCharged   bool `msgpack:"credits_charged"`
	CreditsReleased  bool `msgpack:"credits_released"`
	StorageHandedOff bool `msgpack:"storage_handed_off"`
	BatchNotified    bool `msgpack:"batch_notified"`
	WebhookNotified  bool `msgpack:"webhook_notified"`
}

// Error codes this package sets on its own, from the error table (internal/problem). Workers report their
// own codes through Fail.
const (
	CodeDeadlineExceeded = string(problem.DeadlineExceeded)
	CodeWorkerLost       = string(problem.WorkerLost)
	CodeCancelled        = string(problem.Cancelled)
	// CodeLowDisk marks an attempt that ended because its node was low on disk space (WaitForDisk); it is
	// only ever a last error, never a job's final code.
	CodeLowDisk = string(problem.Unavailable)
)

// Limits of the job lifecycle (spec 3.1 and 8).
const (
	// MaxAttempts is the most processing attempts a job gets.
	MaxAttempts = 5
	// ResultRetention is how long a succeeded job's result stays downloadable.
	ResultRetention = 24 * time.Hour
	// BaseDeadline is the deadline of image and document jobs and the base of a video job's.
	BaseDeadline = 30 * time.Minute
	// VideoPerFrame is added to a video job's deadline for every frame.
	VideoPerFrame = 15 * time.Second
	// MaxVideoDeadline caps a video job's deadline.
	MaxVideoDeadline = 90 * time.Minute
	// FirstBackoff is the wait after the first failed attempt; each later wait doubles.
	FirstBackoff = 2 * time.Second
	// MaxDiskWait caps the wait after an attempt that met a node low on disk space (WaitForDisk): the waits
	// double from FirstBackoff up to it, the Retry-After a low-disk refusal answers, so that a full node does
	// not spin on the job while an operator frees space.
	MaxDiskWait = 30 * time.Second
	// maxDetail bounds a stored error detail (worker messages can quote whole ffmpeg logs).
	maxDetail = 1024
)

// Detection summary bounds (Output.Detection): a webhook event carries at most MaxSummaryUnits units (a PDF
// has up to 10,000 pages; the whole result stays at result_url), and the summary at most MaxDetectionSummary
// bytes of JSON.
const (
	MaxSummaryUnits     = 100
	MaxDetectionSummary = 32 << 10
)
