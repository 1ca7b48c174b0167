// Package batchinput checks what a batch create request brings, before anything is created: the JSON body of
// POST /watermarks/batches, the manifest of POST /watermarks/batches/zip, and the zip's central directory
// (spec 4.4 and 8). Every cost is bounded before it is paid: bodies by size, the central directory by its size
// and entry count before it is parsed, members by their declared sizes and ratios before any is unpacked; the
// unpacking itself (Members.Open) counts the bytes it produces.
//
// It returns *Error carrying the API error code (internal/problem) and the item concerned, and decides
// nothing else: no storage, no actors, no HTTP.
package batchinput

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"filigrane/actors/batchstate"
	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
	"filigrane/codec"
	"filigrane/internal/problem"
)

// Limits of batch requests.
const (
	// MaxBody bounds the JSON create body and the manifest: 100 items of 8 KB data with their names fit.
	MaxBody = 2 << 20
	// MaxData bounds one item's data object (spec 8: 8 KB, read as 8192 bytes like direct requests).
	MaxData = 8 << 10
)

// Error is a refusal of a batch request, with the API code it is answered with.
type Error struct {
	Code   problem.Code
	Detail string
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Detail }

func fail(code problem.Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Options are the batch options shared by the JSON body and the zip manifest.
type Options struct {
	Archive              bool
	Accelerator          jobstate.Accelerator
	WebhookID            string
	StorageDestinationID string
	// OutputFormat is the format of the image items' results (png, jpeg or webp; PNG when absent); documents
	// and videos keep their own format.
	OutputFormat jobstate.OutputFormat
}

// Item is one checked item: its name, declared size (0 for zip items until the directory is read), media
// and watermark id.
type Item struct {
	Filename string
	Size     int64
	Kind     mediakind.Kind
	// WatermarkID is the id the item's data object canonicalises to.
	WatermarkID codec.ID
}

// Request is a checked create request.
type Request struct {
	Options
	Items []Item
}

// Specs returns the items as batchstate wants them.
func (r *Request) Specs() []batchstate.ItemSpec {
	out := make([]batchstate.ItemSpec, len(r.Items))
	for i, it := range r.Items {
		out[i] = batchstate.ItemSpec{Filename: it.Filename, Size: it.Size, Media: it.Kind.Media, WatermarkID: it.WatermarkID.String()}
	}
	return out
}

type rawItem struct {
	Filename *string         `json:"filename"`
	Size     *json.Number    `json:"size"`
	Data     json.RawMessage `json:"data"`
}

type rawRequest struct {
	Items                []rawItem `json:"items"`
	Archive              *bool     `json:"archive"`
	WebhookID            *string   `json:"webhook_id"`
	Accelerator          *string   `json:"accelerator"`
	StorageDestinationID *string   `json:"storage_destination_id"`
	OutputFormat         *string   `json:"output_format"`
}

// ParseCreate checks the JSON body of POST /watermarks/batches: every item has a filename whose extension
// names a media kind, an exact size within that kind's batch limit (413 above it) and a non-empty data
// object; the whole request is checked before anything is created.
func ParseCreate(body []byte) (*Request, *Error) {
	return parse(body, false)
}

// ParseManifest checks the manifest of POST /watermarks/batches/zip: the same as the JSON body, except that
// items carry no size (the zip's directory gives it) and each filename is a member path inside the zip.
func ParseManifest(body []byte) (*Request, *Error) {
	return parse(body, true)
}

func parse(body []byte, zip bool) (*Request, *Error) {
	what := "the request body"
	if zip {
		what = "the manifest"
	}
	if len(body) > MaxBody {
		return nil, fail(problem.TooLarge, "%s exceeds %d bytes", what, MaxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var raw rawRequest
	if err := dec.Decode(&raw); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
			return nil, fail(problem.MalformedJSON, "%s is not valid JSON", what)
		case errors.As(err, &typ):
			return nil, fail(problem.InvalidRequest, "%s: field %q has the wrong type", what, typ.Field)
		}
		// DisallowUnknownFields: `json: unknown field "x"`.
		return nil, fail(problem.InvalidRequest, "%s: %s", what, strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return nil, fail(problem.MalformedJSON, "%s holds more than one JSON value", what)
	}
	var r Request
	if raw.Archive != nil {
		r.Archive = *raw.Archive
	}
	if raw.Accelerator != nil {
		acc, err := jobstate.ParseAccelerator(*raw.Accelerator)
		if err != nil {
			return nil, fail(problem.InvalidAccelerator, "accelerator must be cpu or gpu")
		}
		r.Accelerator = acc
	} else {
		r.Accelerator = jobstate.AcceleratorCPU
	}
	if raw.WebhookID != nil {
		r.WebhookID = *raw.WebhookID
	}
	if raw.StorageDestinationID != nil {
		r.StorageDestinationID = *raw.StorageDestinationID
	}
	r.OutputFormat = jobstate.OutputPNG
	if raw.OutputFormat != nil {
		// The image embed's values and refusal (http/images.go); pdf and mp4 are not offered because the option
		// is the batch's and applies to its image items only.
		f, err := jobstate.ParseOutputFormat(*raw.OutputFormat)
		if err != nil {
			return nil, fail(problem.InvalidRequest, "output_format must be png, jpeg or webp (it applies to the batch's images; documents and videos keep their own format)")
		}
		r.OutputFormat = f
	}
	if r.Archive && r.StorageDestinationID != "" {
		return nil, fail(problem.InvalidRequest, "archive cannot be combined with storage_destination_id")
	}
	if len(raw.Items) < 1 || len(raw.Items) > batchstate.MaxItems {
		return nil, fail(problem.InvalidRequest, "items must hold 1 to %d entries, not %d", batchstate.MaxItems, len(raw.Items))
	}
	seen := make(map[string]int, len(raw.Items))
	r.Items = make([]Item, len(raw.Items))
	for i, ri := range raw.Items {
		it, aerr := checkItem(i, ri, zip)
		if aerr != nil {
			return nil, aerr
		}
		if j, dup := seen[it.Filename]; dup && zip {
			return nil, fail(problem.InvalidZip, "items[%d] and items[%d] both name %q; the manifest lists each member once", j, i, it.Filename)
		}
		seen[it.Filename] = i
		r.Items[i] = it
	}
	return &r, nil
}

func checkItem(i int, ri rawItem, zip bool) (Item, *Error) {
	if ri.Filename == nil || *ri.Filename == "" {
		return Item{}, fail(problem.InvalidRequest, "items[%d].filename is required", i)
	}
	name := *ri.Filename
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > batchstate.MaxFilename {
		return Item{}, fail(problem.InvalidRequest, "items[%d].filename must be 1 to %d characters of UTF-8", i, batchstate.MaxFilename)
	}
	for _, c := range name {
		if unicode.IsControl(c) {
			return Item{}, fail(problem.InvalidRequest, "items[%d].filename contains a control character", i)
		}
	}
	if zip {
		if err := checkMemberPath(name); err != nil {
			return Item{}, fail(problem.InvalidZip, "items[%d].filename %q: %s", i, name, err)
		}
		if ignoredEntry(name) {
			return Item{}, fail(problem.InvalidZip, "items[%d].filename %q is a folder or system entry; those are ignored and must not be listed", i, name)
		}
	} else if strings.ContainsAny(name, "/\\") {
		return Item{}, fail(problem.InvalidRequest, "items[%d].filename must be a name, not a path", i)
	}
	kind, ok := mediakind.ByFilename(name)
	if !ok {
		return Item{}, fail(problem.UnsupportedFileType, "items[%d].filename %q: the extension must name an image type, pdf, mp4, m4v or mov", i, truncateName(name))
	}
	it := Item{Filename: name, Kind: kind}
	switch {
	case zip && ri.Size != nil:
		return Item{}, fail(problem.InvalidRequest, "items[%d].size: zip items take their size from the zip; leave it out", i)
	case !zip:
		if ri.Size == nil {
			return Item{}, fail(problem.InvalidRequest, "items[%d].size is required (the file's exact bytes)", i)
		}
		n, err := ri.Size.Int64()
		if err != nil || n <= 0 {
			return Item{}, fail(problem.InvalidRequest, "items[%d].size must be a positive whole number of bytes", i)
		}
		if limit := kind.Limits.BatchMember; n > limit {
			return Item{}, fail(problem.FileTooLarge, "items[%d] declares %d bytes; a batch %s holds at most %d bytes", i, n, kind.Noun, limit)
		}
		it.Size = n
	}
	id, aerr := checkData(i, ri.Data)
	if aerr != nil {
		return Item{}, aerr
	}
	it.WatermarkID = id
	return it, nil
}

// checkData applies the rules of a direct request's data field to an item's: a non-empty JSON object of at
// most 8 KB that canonicalises (RFC 8785).
func checkData(i int, data json.RawMessage) (codec.ID, *Error) {
	if len(data) == 0 || string(data) == "null" {
		return codec.ID{}, fail(problem.InvalidData, "items[%d].data is required: a non-empty JSON object", i)
	}
	if len(data) > MaxData {
		return codec.ID{}, fail(problem.InvalidData, "items[%d].data exceeds %d bytes", i, MaxData)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return codec.ID{}, fail(problem.InvalidData, "items[%d].data must be a JSON object", i)
	}
	if len(obj) == 0 {
		return codec.ID{}, fail(problem.InvalidData, "items[%d].data must not be an empty object", i)
	}
	id, err := codec.IDFromJSON(data)
	if err != nil {
		return codec.ID{}, fail(problem.InvalidData, "items[%d].data is not I-JSON (RFC 7493) and cannot be canonicalized: %s", i,
			strings.TrimPrefix(err.Error(), "codec: canonical JSON: "))
	}
	return id, nil
}

func truncateName(s string) string {
	if len(s) <= 64 {
		return s
	}
	n := 64
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
