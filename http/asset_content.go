package http

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/persistence"
)

// errBadRange: the Range header is malformed or no part of it lies within the file (416).
var errBadRange = errors.New("range not satisfiable")

// parseByteRange reads a Range header against a file of size bytes. It returns whole=true when the file is
// sent entire: no header, another unit, or several ranges (RFC 9110 lets a server ignore Range, and one range
// is all a download resumer asks for). Otherwise it returns the single range [start, start+length).
func parseByteRange(h string, size int64) (start, length int64, whole bool, err error) {
	if h == "" {
		return 0, size, true, nil
	}
	unit, spec, ok := strings.Cut(h, "=")
	if !ok {
		return 0, 0, false, errBadRange
	}
	if !strings.EqualFold(strings.TrimSpace(unit), "bytes") {
		return 0, size, true, nil
	}
	if strings.Contains(spec, ",") {
		return 0, size, true, nil
	}
	first, last, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return 0, 0, false, errBadRange
	}
	num := func(s string) (int64, bool) {
		if s == "" || len(s) > 19 || strings.TrimLeft(s, "0123456789") != "" {
			return 0, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil
	}
	if first == "" { // suffix range: the last n bytes
		n, ok := num(last)
		if !ok || n == 0 || size == 0 {
			return 0, 0, false, errBadRange
		}
		n = min(n, size)
		return size - n, n, false, nil
	}
	a, ok := num(first)
	if !ok || a >= size {
		return 0, 0, false, errBadRange
	}
	end := size - 1
	if last != "" {
		b, ok := num(last)
		if !ok || b < a {
			return 0, 0, false, errBadRange
		}
		end = min(b, size-1)
	}
	return a, end - a + 1, false, nil
}

// assetContent streams an asset's file: its MIME type, a safe attachment filename, and single byte ranges
// (206) for resumed downloads. A deleted or unknown asset is 404; an asset whose hosted file expired is 410
// asset_file_expired: the record is still there (spec 3.7), only its file is gone for good, which is what
// 410 says and lets a client tell "wrong id" from "too late".
func (s *Server) assetContent(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	as, _, err := s.assets().Lookup(c, p.Key.OrgID, params["asset_id"])
	if err != nil {
		s.assetFailure(ctx, err)
		return
	}
	if as.Stored() {
		s.storedAssetContent(ctx, p, as)
		return
	}
	if !as.FileAvailable(s.cfg.Clock.Now()) {
		writeProblem(ctx, CodeAssetFileExpired, fmt.Sprintf("the file expired at %s; the record stays until deleted", as.FileExpiresAt.UTC().Format(time.RFC3339)))
		return
	}
	h := &ctx.Response.Header
	etag := `"` + as.SHA256 + `"`
	h.Set("Accept-Ranges", "bytes")
	h.Set("ETag", etag)
	h.Set("Cache-Control", "private, no-store")
	rangeHeader := string(ctx.Request.Header.Peek("Range"))
	if ir := string(ctx.Request.Header.Peek("If-Range")); ir != "" && ir != etag {
		rangeHeader = "" // the client's partial copy is of another file: send this one whole
	}
	start, length, whole, err := parseByteRange(rangeHeader, as.SizeBytes)
	if err != nil {
		h.Set("Content-Range", fmt.Sprintf("bytes */%d", as.SizeBytes))
		writeProblem(ctx, CodeRangeNotSatisfiable, fmt.Sprintf("the range %q does not lie within the file's %d bytes", truncate(rangeHeader, 100), as.SizeBytes))
		return
	}
	body, err := s.openBlobBody(ctx, as.BlobKey, start, length)
	if errors.Is(err, persistence.ErrNotFound) {
		// Its delivery may have ended the staging since the record was read: then the bucket has it.
		if cur, _, lerr := s.assets().Lookup(c, p.Key.OrgID, params["asset_id"]); lerr == nil && cur.Stored() {
			h.Del("Accept-Ranges")
			h.Del("Content-Range")
			s.storedAssetContent(ctx, p, cur)
			return
		}
		writeProblem(ctx, CodeAssetFileExpired, "the file is no longer stored")
		return
	}
	if err != nil {
		s.unavailable(ctx, err)
		return
	}
	setAssetDownloadHeaders(ctx, as)
	status := 200
	if !whole {
		status = 206
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, start+length-1, as.SizeBytes))
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType(as.ContentType)
	sendBlobBody(ctx, body, length)
}

// setAssetDownloadHeaders names the downloaded file (a safe attachment filename) and the asset.
func setAssetDownloadHeaders(ctx *fasthttp.RequestCtx, as *actors.Asset) {
	name := actors.SafeFilename(as.Name)
	if name == "" || strings.Trim(name, "._") == "" {
		name = actors.SafeFilename(as.Filename)
	}
	if name == "" || strings.Trim(name, "._") == "" {
		name = "asset"
	}
	ctx.Response.Header.Set("Content-Disposition", `attachment; filename="`+name+`"`)
	ctx.Response.Header.Set("X-Asset-ID", as.PublicID())
}

// storedAssetContent answers the content of an asset whose file its delivery stored in the customer's bucket
// and whose hosted copy was then removed: the object read back from the bucket and checked against the
// delivered ETag (openDelivered: 410 storage_object_unavailable when it is gone or changed there, 503 when
// the bucket cannot be read). Always the whole file: a Range is ignored (RFC 9110 allows it) and
// Accept-Ranges says none, since the bytes come through from the bucket.
func (s *Server) storedAssetContent(ctx *fasthttp.RequestCtx, p *principal, as *actors.Asset) {
	body, obj := s.openStoredAsset(ctx, p.Key.OrgID, as)
	if body == nil {
		return
	}
	h := &ctx.Response.Header
	h.Set("Accept-Ranges", "none")
	h.Set("ETag", `"`+as.SHA256+`"`)
	h.Set("Cache-Control", "private, no-store")
	setAssetDownloadHeaders(ctx, as)
	ctx.SetStatusCode(200)
	ctx.SetContentType(as.ContentType)
	sendBlobBody(ctx, body, obj.Size)
}
