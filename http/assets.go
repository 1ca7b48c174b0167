package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"filigrane/actors"
)

// Asset list page sizes (spec 8).
const (
	defaultAssetPage = 25
	maxAssetPage     = 100
	maxBulkDelete    = 50
)

// assetRoutes registers the asset library endpoints (spec 4.7).
func (s *Server) assetRoutes() {
	read := []string{actors.ScopeAssetsRead}
	write := []string{actors.ScopeAssetsWrite}
	del := []string{actors.ScopeAssetsDelete}
	// bulk-delete comes before the {asset_id} routes so that it is never taken for an id.
	s.router.handle("POST", "/assets/bulk-delete", s.authed(del, s.bulkDeleteAssets))
	s.router.handle("GET", "/assets", s.authed(read, s.listAssets))
	s.router.handle("GET", "/assets/{asset_id}", s.authed(read, s.getAsset))
	s.router.handle("PATCH", "/assets/{asset_id}", s.authed(write, s.patchAsset))
	s.router.handle("DELETE", "/assets/{asset_id}", s.authed(del, s.deleteAsset))
	s.router.handle("GET", "/assets/{asset_id}/content", s.authed(read, s.assetContent))
}

func (s *Server) assets() actors.Assets {
	return actors.Assets{Store: s.cfg.Store, Blobs: s.cfg.Blobs}
}

// assetJSON is an asset record as the API shows it (spec 2.6).
type assetJSON struct {
	ID            string  `json:"id"`
	Name          string  `json:"name"`
	Version       int64   `json:"version"`
	Kind          string  `json:"kind"`
	ParentAssetID *string `json:"parent_asset_id"`
	MediaType     string  `json:"media_type"`
	Format        string  `json:"format"`
	ContentType   string  `json:"content_type"`
	SizeBytes     int64   `json:"size_bytes"`
	SHA256        string  `json:"sha256"`
	RequestID     string  `json:"request_id"`
	// WatermarkID is null for sources (the spec says "empty"; null is what the rest of the API uses for absent
	// ids, e.g. a detection's watermark_id).
	WatermarkID   *string `json:"watermark_id"`
	CreatedAt     string  `json:"created_at"`
	UpdatedAt     string  `json:"updated_at"`
	FileExpiresAt *string `json:"file_expires_at"`
	FileAvailable bool    `json:"file_available"`
	DownloadURL   *string `json:"download_url"`
	// The file's pixel size (images, video frames), pages (documents), frames and duration (videos): fields of
	// ours beyond spec 2.6, omitted where they do not apply.
	Width           *int     `json:"width,omitempty"`
	Height          *int     `json:"height,omitempty"`
	PageCount       *int     `json:"page_count,omitempty"`
	FrameCount      *int64   `json:"frame_count,omitempty"`
	DurationSeconds *float64 `json:"duration_seconds,omitempty"`
	// Metadata is nil (omitted) in lists and with include_metadata=false, an object (possibly empty) otherwise.
	Metadata any `json:"metadata,omitempty"`
	assetStorageJSON
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// positive is n when above zero, else nil (an omitted field).
func positive[T int | int64](n T) *T {
	if n <= 0 {
		return nil
	}
	return &n
}

func renderAsset(as *actors.Asset, now time.Time, withMetadata bool) assetJSON {
	out := assetJSON{
		ID: as.PublicID(), Name: as.Name, Version: as.Version, Kind: as.Kind, ParentAssetID: optional(as.PublicParentID()),
		MediaType: as.MediaType, Format: as.Format, ContentType: as.ContentType, SizeBytes: as.SizeBytes,
		SHA256: as.SHA256, RequestID: as.RequestID, WatermarkID: optional(as.WatermarkID),
		CreatedAt: as.CreatedAt.UTC().Format(time.RFC3339), UpdatedAt: as.UpdatedAt.UTC().Format(time.RFC3339),
		FileAvailable: as.FileAvailable(now),
	}
	out.Width, out.Height, out.PageCount = positive(as.Media.Width), positive(as.Media.Height), positive(as.Media.Pages)
	out.FrameCount = positive(as.Media.Frames)
	if as.Media.DurationMS > 0 {
		d := float64(as.Media.DurationMS) / 1000
		out.DurationSeconds = &d
	}
	if !as.FileExpiresAt.IsZero() {
		out.FileExpiresAt = optional(as.FileExpiresAt.UTC().Format(time.RFC3339))
	}
	if as.Stored() {
		// Delivered to the customer's bucket and no longer hosted here: downloads read the bucket
		// (GET /assets/{id}/content), and the bucket's policy, not ours, decides how long it stays.
		out.FileAvailable = true
	}
	if out.FileAvailable {
		out.DownloadURL = optional("/assets/" + out.ID + "/content")
	}
	if withMetadata {
		if as.Metadata != nil {
			out.Metadata = as.Metadata
		} else {
			out.Metadata = map[string]any{}
		}
	}
	return out
}

// storeCtx bounds the store calls of one asset request.
func (s *Server) storeCtx(ctx *fasthttp.RequestCtx) (context.Context, context.CancelFunc) {
	return s.requestContext(ctx, s.cfg.ActorTimeout)
}

// assetFailure answers an error of the asset library.
func (s *Server) assetFailure(ctx *fasthttp.RequestCtx, err error) {
	var missing *actors.MissingAssetError
	switch {
	case errors.As(err, &missing):
		// An asset id is ast_ + 64 digits (68 characters): cut only what is longer, so the detail names the
		// id the client sent (it was cut to 64, dropping the last four digits).
		writeProblem(ctx, CodeAssetNotFound, "asset "+truncate(missing.ID, 100)+" does not exist; nothing was deleted")
	case errors.Is(err, actors.ErrAssetNotFound):
		writeProblem(ctx, CodeAssetNotFound, "no such asset")
	case errors.Is(err, actors.ErrAssetVersionConflict):
		writeProblem(ctx, CodeAssetVersionConflict, "the asset changed since that version; read it again and retry with its current version")
	default:
		s.unavailable(ctx, err)
	}
}

func (s *Server) listAssets(ctx *fasthttp.RequestCtx, p *principal, _ map[string]string) {
	q := newListQuery(ctx)
	limit, aerr := q.limit(defaultAssetPage, maxAssetPage)
	if aerr != nil {
		writeAPIError(ctx, aerr)
		return
	}
	var f actors.AssetFilter
	if v, ok := q.value("kind"); ok {
		f.Kind = v
		if f.Kind != actors.AssetSource && f.Kind != actors.AssetWatermarked {
			writeProblem(ctx, CodeInvalidRequest, "kind must be source or watermarked")
			return
		}
	}
	if v, ok := q.value("media_type"); ok {
		f.MediaType = v
		if f.MediaType != "image" && f.MediaType != "document" && f.MediaType != "video" {
			writeProblem(ctx, CodeInvalidRequest, "media_type must be image, document or video")
			return
		}
	}
	if v, ok := q.value("watermark_id"); ok {
		f.WatermarkID = strings.ToLower(v)
		if !isHex(f.WatermarkID, 64) {
			writeProblem(ctx, CodeInvalidRequest, "watermark_id must be exactly 64 hexadecimal characters")
			return
		}
	}
	after := ""
	if v, ok := q.value("cursor"); ok {
		pos, ok := decodeCursor(p.Key.OrgID, f, v)
		if !ok {
			writeProblem(ctx, CodeInvalidCursor, "the cursor is malformed or was made for other filters or another organization; start again without a cursor")
			return
		}
		after = pos
	}
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	page, err := s.assets().List(c, p.Key.OrgID, f, after, limit)
	if err != nil {
		s.unavailable(ctx, err)
		return
	}
	now := s.cfg.Clock.Now()
	items := make([]assetJSON, 0, len(page.Assets))
	for _, as := range page.Assets {
		items = append(items, s.withStorage(ctx, renderAsset(as, now, false), as))
	}
	var next *string
	if page.Next != "" {
		next = optional(encodeCursor(p.Key.OrgID, f, page.Next))
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	writeJSON(ctx, 200, map[string]any{"items": items, "next_cursor": next})
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (s *Server) getAsset(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	withMeta := true
	if args := ctx.QueryArgs(); args.Has("include_metadata") {
		v, err := strconv.ParseBool(string(args.Peek("include_metadata")))
		if err != nil {
			writeProblem(ctx, CodeInvalidRequest, "include_metadata must be true or false")
			return
		}
		withMeta = v
	}
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	as, _, err := s.assets().Lookup(c, p.Key.OrgID, params["asset_id"])
	if err != nil {
		s.assetFailure(ctx, err)
		return
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	writeJSON(ctx, 200, s.withStorage(ctx, renderAsset(as, s.cfg.Clock.Now(), withMeta), as))
}

// readAssetBody reads a small JSON body of at most maxAssetBodyBytes.
func readAssetBody(ctx *fasthttp.RequestCtx) ([]byte, *apiError) {
	if !jsonBodyType(string(ctx.Request.Header.ContentType())) {
		return nil, newAPIError(CodeUnsupportedMedia, "send the body as application/json")
	}
	if cl := ctx.Request.Header.ContentLength(); cl > maxAssetBodyBytes {
		return nil, newAPIError(CodeTooLarge, "the body exceeds %d bytes", maxAssetBodyBytes)
	}
	var r io.Reader = ctx.RequestBodyStream()
	if r == nil {
		r = bytes.NewReader(ctx.Request.Body())
	}
	body, err := io.ReadAll(io.LimitReader(r, maxAssetBodyBytes+1))
	if err != nil {
		return nil, newAPIError(CodeBadRequest, "the body could not be read")
	}
	if len(body) > maxAssetBodyBytes {
		return nil, newAPIError(CodeTooLarge, "the body exceeds %d bytes", maxAssetBodyBytes)
	}
	return body, nil
}

// answerBodyError answers a body that was refused before it was read to the end; the connection closes, since
// the rest of the body may still be on the wire.
func answerBodyError(ctx *fasthttp.RequestCtx, aerr *apiError) {
	if aerr.code == CodeTooLarge || aerr.code == CodeUnsupportedMedia {
		ctx.SetConnectionClose()
	}
	writeProblem(ctx, aerr.code, aerr.detail)
}

func (s *Server) patchAsset(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	body, aerr := readAssetBody(ctx)
	if aerr != nil {
		answerBodyError(ctx, aerr)
		return
	}
	patch, aerr := parseAssetPatch(body)
	if aerr != nil {
		writeProblem(ctx, aerr.code, aerr.detail)
		return
	}
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	now := s.cfg.Clock.Now()
	as, err := s.assets().Patch(c, p.Key.OrgID, params["asset_id"], patch, now)
	if err != nil {
		s.assetFailure(ctx, err)
		return
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	writeJSON(ctx, 200, s.withStorage(ctx, renderAsset(as, now, true), as))
}

// mayDelete checks the role half of the delete permission (the scope half is checked by authed).
func mayDelete(ctx *fasthttp.RequestCtx, p *principal) bool {
	if p.Role == actors.RoleOwner || p.Role == actors.RoleAdmin {
		return true
	}
	writeProblem(ctx, CodeForbiddenRole, "deleting assets needs an owner or admin member's key; this key's member is "+string(p.Role))
	return false
}

func (s *Server) deleteAsset(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	if !mayDelete(ctx, p) {
		return
	}
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	if err := s.assets().Delete(c, p.Key.OrgID, params["asset_id"], s.cfg.Clock.Now()); err != nil {
		s.assetFailure(ctx, err)
		return
	}
	ctx.SetStatusCode(204)
}

// parseBulkDelete validates {asset_ids: [1 to 50 strings]} and returns the ids without repeats.
func parseBulkDelete(body []byte) ([]string, *apiError) {
	if !utf8.Valid(body) || !json.Valid(body) {
		return nil, newAPIError(CodeMalformedJSON, "the body is not valid UTF-8 JSON")
	}
	var req struct {
		AssetIDs []json.RawMessage `json:"asset_ids"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, newAPIError(CodeInvalidRequest, "send {\"asset_ids\": [...]} with a list of asset id strings and no other field")
	}
	if len(req.AssetIDs) < 1 || len(req.AssetIDs) > maxBulkDelete {
		return nil, newAPIError(CodeInvalidRequest, "asset_ids must list 1 to %d ids", maxBulkDelete)
	}
	ids := make([]string, 0, len(req.AssetIDs))
	seen := map[string]bool{}
	for i, raw := range req.AssetIDs {
		var id *string
		if err := json.Unmarshal(raw, &id); err != nil || id == nil || *id == "" {
			return nil, newAPIError(CodeInvalidRequest, "asset_ids[%d] must be a non-empty string", i)
		}
		if !seen[*id] {
			seen[*id] = true
			ids = append(ids, *id)
		}
	}
	return ids, nil
}

func (s *Server) bulkDeleteAssets(ctx *fasthttp.RequestCtx, p *principal, _ map[string]string) {
	if !mayDelete(ctx, p) {
		ctx.SetConnectionClose() // the body was not read
		return
	}
	body, aerr := readAssetBody(ctx)
	if aerr != nil {
		answerBodyError(ctx, aerr)
		return
	}
	ids, aerr := parseBulkDelete(body)
	if aerr != nil {
		writeProblem(ctx, aerr.code, aerr.detail)
		return
	}
	// Up to 50 deletions, each a few store writes and a file delete: more than one actor call's budget.
	c, cancel := s.requestContext(ctx, 4*s.cfg.ActorTimeout)
	defer cancel()
	if err := s.assets().DeleteMany(c, p.Key.OrgID, ids, s.cfg.Clock.Now()); err != nil {
		s.assetFailure(ctx, err)
		return
	}
	ctx.SetStatusCode(204)
}
