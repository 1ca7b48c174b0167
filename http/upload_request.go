package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"

	"filigrane/actors"
)

// maxUploadRequestBody bounds the JSON body of POST /uploads (413 above it).
const maxUploadRequestBody = 64 << 10

// uploadRequest is a validated POST /uploads body.
type uploadRequest struct {
	Kind     actors.UploadKind
	Filename string
	Size     int64
}

// parseUploadRequest parses and checks the body of POST /uploads: malformed JSON (or not an object) is a 400,
// a missing or wrong-typed field a 422. Unknown members are ignored so that clients sending extra metadata
// keep working. Size limits per kind are checked by actors.NewUpload (413).
func parseUploadRequest(body []byte) (uploadRequest, *apiError) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return uploadRequest{}, newAPIError(CodeMalformedJSON, "the body must be a JSON object {kind, filename, size}")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return uploadRequest{}, newAPIError(CodeMalformedJSON, "the body must hold exactly one JSON object")
	}
	var req uploadRequest
	var kind string
	if err := json.Unmarshal(raw["kind"], &kind); err != nil || raw["kind"] == nil {
		return req, newAPIError(CodeInvalidRequest, "kind must be one of image, document, video, detect")
	}
	k, err := actors.ParseUploadKind(kind)
	if err != nil {
		return req, newAPIError(CodeInvalidRequest, "kind must be one of image, document, video, detect")
	}
	req.Kind = k
	if raw["filename"] == nil || json.Unmarshal(raw["filename"], &req.Filename) != nil {
		return req, newAPIError(CodeInvalidRequest, "filename must be a string")
	}
	var n json.Number
	// json.Number also takes a string holding a number ("10"); the spec says integer, so only a JSON number.
	if sz := bytes.TrimSpace(raw["size"]); len(sz) == 0 || sz[0] == '"' || json.Unmarshal(sz, &n) != nil {
		return req, newAPIError(CodeInvalidRequest, "size must be an integer number of bytes")
	}
	size, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		// 1e6 or 1000000.0 are integers too; accept them when exact.
		f, ferr := n.Float64()
		if ferr != nil || f != math.Trunc(f) || f < 1 || f > math.MaxInt64/2 {
			return req, newAPIError(CodeInvalidRequest, "size must be an integer number of bytes")
		}
		size = int64(f)
	}
	if size <= 0 {
		return req, newAPIError(CodeInvalidRequest, "size must be a positive number of bytes")
	}
	req.Size = size
	return req, nil
}
