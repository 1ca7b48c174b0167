package http

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/url"
	"strings"

	"filigrane/persistence"
)

// maxDataBytes bounds the `data` field (spec: a JSON object of up to 8 KB; we read KB as 1024 bytes).
const maxDataBytes = 8 << 10

// maxFormParts bounds the parts of a media form; a form has at most file, data and upload_id.
const maxFormParts = 16

// maxSmallField bounds a form field that is not the file.
const maxSmallField = 1 << 10

// apiError is an error with the problem code it answers with.
type apiError struct {
	code   Code
	detail string
	// limit is the limit that refused the request (a 429's concurrent jobs), 0 when none.
	limit int
	// uploadUsable: the refusal is about this request, not about the upload it named, whose code alone would
	// reject the upload (a file above the synchronous detection's size is file_too_large, yet the async
	// endpoint takes it).
	uploadUsable bool
}

func (e *apiError) Error() string { return string(e.code) + ": " + e.detail }

func newAPIError(code Code, format string, args ...any) *apiError {
	return &apiError{code: code, detail: fmt.Sprintf(format, args...)}
}

// storedFile is a form file streamed into Blobs.
type storedFile struct {
	Key         string
	Info        persistence.BlobInfo
	Filename    string
	ContentType string
	// ConsumedByRequest: the file is an upload's that this request's id already consumed (a replay).
	ConsumedByRequest bool
}

// mediaForm is a parsed embed or detect form.
type mediaForm struct {
	File     *storedFile
	Data     []byte // nil when absent
	UploadID string
	// Options holds the request options sent as form fields (jobOptionNames), by name.
	Options map[string]string
}

// errFileTooLarge aborts a blob Put when the file part passes its limit; Put then leaves nothing behind.
var errFileTooLarge = errors.New("file part exceeds its limit")

// limitedReader fails with errFileTooLarge instead of stopping quietly at the limit.
type limitedReader struct {
	r    io.Reader
	left int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, errFileTooLarge
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, errFileTooLarge
	}
	return n, err
}

// fileRules are what a media route allows of a form's file part, and how it refuses one.
type fileRules struct {
	// max is the largest file, in bytes.
	max int64
	// tooLargeHint ends the detail of a file above max: where a larger file can go, if anywhere.
	tooLargeHint string
	// invalid is the code of a file the route cannot read at all (an empty one): its kind's (invalid_image,
	// invalid_document, invalid_video), as the probe of a broken file of that kind answers.
	invalid Code
}

// readMediaForm is readMediaFormWith for an image route whose files above maxFile go through an upload.
func readMediaForm(ctx context.Context, contentType string, body io.Reader, blobs persistence.Blobs, key string, maxFile int64) (*mediaForm, error) {
	return readMediaFormWith(ctx, contentType, body, blobs, key, fileRules{max: maxFile,
		tooLargeHint: "send larger files through an upload", invalid: CodeInvalidImage})
}

// readMediaFormWith parses a multipart/form-data body as it arrives: the `file` part streams into blobs under
// key (never held in memory), `data` and `upload_id` are read with small limits. On any error nothing stays
// stored.
func readMediaFormWith(ctx context.Context, contentType string, body io.Reader, blobs persistence.Blobs, key string, rules fileRules) (form *mediaForm, err error) {
	mt, params, perr := mime.ParseMediaType(contentType)
	if perr == nil && mt == "application/x-www-form-urlencoded" {
		return readURLEncodedForm(body)
	}
	if perr != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, newAPIError(CodeUnsupportedMedia, "send the request as multipart/form-data")
	}
	mr := multipart.NewReader(body, params["boundary"])
	form = &mediaForm{}
	defer func() {
		if err != nil && form != nil && form.File != nil {
			_ = blobs.Delete(context.WithoutCancel(ctx), form.File.Key)
		}
	}()
	uploadIDSeen := false
	for parts := 0; ; parts++ {
		if parts >= maxFormParts {
			return form, newAPIError(CodeInvalidRequest, "the form has more than %d parts", maxFormParts)
		}
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return form, errMalformedForm()
		}
		switch part.FormName() {
		case "file":
			if form.File != nil {
				return form, newAPIError(CodeInvalidRequest, "send exactly one file")
			}
			info, err := blobs.Put(ctx, key, &limitedReader{r: part, left: rules.max})
			if errors.Is(err, errFileTooLarge) {
				return form, newAPIError(CodeFileTooLarge, "the file exceeds %d bytes; %s", rules.max, rules.tooLargeHint)
			}
			if err != nil {
				if isMultipartErr(err) {
					return form, errMalformedForm()
				}
				return form, fmt.Errorf("store upload: %w", err)
			}
			form.File = &storedFile{Key: key, Info: info, Filename: part.FileName(), ContentType: part.Header.Get("Content-Type")}
			if info.Size == 0 {
				return form, newAPIError(rules.invalid, "the file is empty")
			}
		case "data":
			// A second data or upload_id part is refused, as a second option is: the last one silently won,
			// so a client that appended a field embedded a payload it did not mean.
			if form.Data != nil {
				return form, newAPIError(CodeInvalidRequest, "data is sent twice")
			}
			b, err := io.ReadAll(io.LimitReader(part, maxDataBytes+1))
			if err != nil {
				return form, errMalformedForm()
			}
			if len(b) > maxDataBytes {
				return form, newAPIError(CodeInvalidData, "data exceeds %d bytes", maxDataBytes)
			}
			form.Data = b // never nil (io.ReadAll): an empty part is still a part
		case "upload_id":
			if uploadIDSeen {
				return form, newAPIError(CodeInvalidRequest, "upload_id is sent twice")
			}
			uploadIDSeen = true
			b, err := io.ReadAll(io.LimitReader(part, maxSmallField+1))
			if err != nil || len(b) > maxSmallField {
				return form, newAPIError(CodeInvalidRequest, "upload_id is malformed")
			}
			form.UploadID = strings.TrimSpace(string(b))
		case "accelerator", "webhook_id", "storage_destination_id", "storage_key", "output_format":
			b, err := io.ReadAll(io.LimitReader(part, maxSmallField+1))
			if err != nil || len(b) > maxSmallField {
				return form, newAPIError(CodeInvalidRequest, "%s is malformed", part.FormName())
			}
			if form.Options == nil {
				form.Options = map[string]string{}
			}
			if _, dup := form.Options[part.FormName()]; dup {
				return form, newAPIError(CodeInvalidRequest, "%s is sent twice", part.FormName())
			}
			form.Options[part.FormName()] = strings.TrimSpace(string(b))
		default:
			// Unknown fields are read and ignored, so that clients sending extra metadata keep working.
			if _, err := io.Copy(io.Discard, io.LimitReader(part, maxSmallField+1)); err != nil {
				return form, errMalformedForm()
			}
		}
	}
	return form, nil
}

// maxURLEncodedForm bounds a url-encoded media form: the data field (8 KiB, up to three bytes encoded per
// byte) and the small fields.
const maxURLEncodedForm = 3*maxDataBytes + 8*maxSmallField

// readURLEncodedForm reads a media form sent as application/x-www-form-urlencoded, as Etchv's Python SDK
// sends a request that names an upload. It carries fields only: a file needs multipart. The same fields and
// bounds as the multipart form apply.
func readURLEncodedForm(body io.Reader) (*mediaForm, error) {
	b, err := io.ReadAll(io.LimitReader(body, maxURLEncodedForm+1))
	if err != nil {
		return nil, errMalformedForm()
	}
	if len(b) > maxURLEncodedForm {
		return nil, newAPIError(CodeInvalidRequest, "the url-encoded form exceeds %d bytes; send files as multipart/form-data", maxURLEncodedForm)
	}
	if bytes.Count(b, []byte("&")) >= maxFormParts {
		return nil, newAPIError(CodeInvalidRequest, "the form has more than %d fields", maxFormParts)
	}
	values, err := url.ParseQuery(string(b))
	if err != nil {
		return nil, newAPIError(CodeBadRequest, "the url-encoded form is malformed")
	}
	form := &mediaForm{}
	for name, vs := range values {
		if len(vs) > 1 {
			return nil, newAPIError(CodeInvalidRequest, "%s is sent twice", name)
		}
		v := vs[0]
		switch name {
		case "file":
			return nil, newAPIError(CodeUnsupportedMedia, "send a file as multipart/form-data; a url-encoded form can only name an upload_id")
		case "data":
			if len(v) > maxDataBytes {
				return nil, newAPIError(CodeInvalidData, "data exceeds %d bytes", maxDataBytes)
			}
			form.Data = []byte(v)
		case "upload_id":
			if len(v) > maxSmallField {
				return nil, newAPIError(CodeInvalidRequest, "upload_id is malformed")
			}
			form.UploadID = strings.TrimSpace(v)
		case "accelerator", "webhook_id", "storage_destination_id", "storage_key", "output_format":
			if len(v) > maxSmallField {
				return nil, newAPIError(CodeInvalidRequest, "%s is malformed", name)
			}
			if form.Options == nil {
				form.Options = map[string]string{}
			}
			form.Options[name] = strings.TrimSpace(v)
		}
		// Unknown fields are ignored, as in the multipart form.
	}
	return form, nil
}

// errMalformedForm is the answer to a body that breaks multipart framing. The parser's error is not quoted:
// it can carry the blob store's wrapping (keys, paths) and reads as a Go error chain.
func errMalformedForm() *apiError {
	return newAPIError(CodeBadRequest, "the multipart body is malformed (check the boundary and that the body is complete)")
}

func isMultipartErr(err error) bool {
	s := err.Error()
	return strings.Contains(s, "multipart") || errors.Is(err, io.ErrUnexpectedEOF)
}
