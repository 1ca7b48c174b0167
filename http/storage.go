package http

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/actors/assetid"
	"filigrane/actors/jobstate"
	"filigrane/actors/outbox"
	"filigrane/actors/storagedest"
	"filigrane/internal/hiddenchar"
	"filigrane/persistence"
)

// storageRoutes registers the storage destination endpoints (spec 2.6; paths and shapes follow Etchv's
// SDKs, docs/storage.md). Reading needs storage:read; changing needs storage:write and an owner or admin.
func (s *Server) storageRoutes() {
	if s.cfg.Storage == nil {
		return
	}
	read, write := []string{actors.ScopeStorageRead}, []string{actors.ScopeStorageWrite}
	s.router.handle("GET", "/storage/destinations", s.authed(read, s.listDestinations))
	s.router.handle("POST", "/storage/destinations", s.authed(write, s.createDestination))
	s.router.handle("GET", "/storage/destinations/{destination_id}", s.authed(read, s.getDestination))
	s.router.handle("PATCH", "/storage/destinations/{destination_id}", s.authed(write, s.updateDestination))
	s.router.handle("DELETE", "/storage/destinations/{destination_id}", s.authed(write, s.deleteDestination))
	s.router.handle("POST", "/storage/destinations/{destination_id}/verify", s.authed(write, s.verifyDestination))
	s.router.handle("GET", "/storage/destinations/{destination_id}/deliveries", s.authed(read, s.listDestinationDeliveries))
	s.router.handle("POST", "/storage/destinations/{destination_id}/deliveries", s.authed(write, s.moveToDestination))
}

// maxDestinationBody bounds a create or update body: a handful of short strings.
const maxDestinationBody = 16 << 10

// destinationBody is the JSON of a create or update. Credentials come in; they never go out.
type destinationBody struct {
	Name            string `json:"name"`
	Provider        string `json:"provider"`
	Endpoint        string `json:"endpoint"`
	Region          string `json:"region"`
	Bucket          string `json:"bucket"`
	Prefix          string `json:"prefix"`
	PathStyle       *bool  `json:"path_style"`
	Secure          *bool  `json:"secure"`
	Enabled         *bool  `json:"enabled"`
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
	// Credentials is how Etchv's SDKs pass keys through: JSON text {"access_key_id", "secret_access_key"}.
	Credentials *string `json:"credentials"`
	// Visibility and RoleARN are Etchv's fields; only private buckets with access keys are served.
	Visibility *string `json:"visibility"`
	RoleARN    *string `json:"role_arn"`
}

func parseDestinationBody(ctx *fasthttp.RequestCtx) (storagedest.Input, *apiError) {
	if !jsonBodyType(string(ctx.Request.Header.ContentType())) {
		return storagedest.Input{}, newAPIError(CodeUnsupportedMedia, "send the body as application/json")
	}
	body := ctx.PostBody()
	if len(body) > maxDestinationBody {
		return storagedest.Input{}, newAPIError(CodeTooLarge, "a storage destination body is at most 16 KiB")
	}
	var b destinationBody
	if aerr := decodeObject(body, &b, "a JSON object of the documented fields (docs/storage.md)"); aerr != nil {
		return storagedest.Input{}, aerr
	}
	if b.Provider != "" && b.Provider != "s3" {
		return storagedest.Input{}, newAPIError(CodeInvalidRequest, "provider must be s3 (any S3-compatible endpoint)")
	}
	if b.RoleARN != nil && *b.RoleARN != "" {
		return storagedest.Input{}, newAPIError(CodeInvalidRequest, "role_arn is not supported: send access keys (credentials or access_key_id and secret_access_key)")
	}
	if b.Visibility != nil && *b.Visibility != "" && *b.Visibility != "private" {
		return storagedest.Input{}, newAPIError(CodeInvalidRequest, "visibility must be private: objects are never made public (public_url is null)")
	}
	if b.Credentials != nil && *b.Credentials != "" {
		if b.AccessKeyID != "" || b.SecretAccessKey != "" {
			return storagedest.Input{}, newAPIError(CodeInvalidRequest, "send credentials or access_key_id and secret_access_key, not both")
		}
		var c struct {
			AccessKeyID     string `json:"access_key_id"`
			SecretAccessKey string `json:"secret_access_key"`
		}
		cd := json.NewDecoder(strings.NewReader(*b.Credentials))
		cd.DisallowUnknownFields()
		if err := cd.Decode(&c); err != nil || c.AccessKeyID == "" || c.SecretAccessKey == "" {
			return storagedest.Input{}, newAPIError(CodeInvalidRequest, `credentials must be JSON text {"access_key_id": "...", "secret_access_key": "..."}`)
		}
		b.AccessKeyID, b.SecretAccessKey = c.AccessKeyID, c.SecretAccessKey
	}
	return storagedest.Input{Name: b.Name, Endpoint: b.Endpoint, Region: b.Region, Bucket: b.Bucket, Prefix: b.Prefix,
		AccessKey: b.AccessKeyID, SecretKey: b.SecretAccessKey, Secure: b.Secure, PathStyle: b.PathStyle, Enabled: b.Enabled}, nil
}

// renderDestination is the public shape: no credentials, only whether it is usable.
func renderDestination(d *storagedest.Destination) map[string]any {
	v := map[string]any{
		"id": d.ID, "name": d.Name, "provider": "s3", "visibility": "private", "endpoint": d.Endpoint, "secure": d.Secure, "region": d.Region,
		"bucket": d.Bucket, "prefix": d.Prefix, "path_style": d.PathStyle, "enabled": d.Enabled,
		"verified_at": nil, "last_error": nil, "created_at": d.CreatedAt.UTC().Format(time.RFC3339),
		"updated_at": d.UpdatedAt.UTC().Format(time.RFC3339),
	}
	if d.VerifiedAt != nil {
		v["verified_at"] = d.VerifiedAt.UTC().Format(time.RFC3339)
	}
	if d.LastError != "" {
		v["last_error"] = remoteError(d.LastError)
	}
	return v
}

// remoteError is an error that may quote a remote server (an S3 endpoint's message, a webhook receiver's
// certificate names) as the API answers it, nil when empty. New records store it escaped and bounded already
// (hiddenchar.Remote); one stored before that rule may hold a megabyte or a terminal escape sequence, and is
// answered the same way, so no reader of the API (a script piping it through jq -r) gets them as themselves.
func remoteError(s string) *string {
	if s == "" {
		return nil
	}
	r := hiddenchar.Remote(s, hiddenchar.RemoteLimit)
	return &r
}

// mayManageStorage checks the role half of the storage:write permission.
func mayManageStorage(ctx *fasthttp.RequestCtx, p *principal) bool {
	if p.Role == actors.RoleOwner || p.Role == actors.RoleAdmin {
		return true
	}
	writeProblem(ctx, CodeForbiddenRole, "managing storage destinations needs an owner or admin member's key; this key's member is "+string(p.Role))
	return false
}

func (s *Server) storageFailure(ctx *fasthttp.RequestCtx, err error) {
	switch {
	case errors.Is(err, storagedest.ErrNotFound):
		writeProblem(ctx, CodeStorageNotFound, "no such storage destination")
	case errors.Is(err, storagedest.ErrLimit):
		writeProblem(ctx, CodeStorageLimit, err.Error())
	case errors.Is(err, storagedest.ErrInvalid):
		writeProblem(ctx, CodeInvalidRequest, err.Error())
	default:
		s.unavailable(ctx, err)
	}
}

func (s *Server) listDestinations(ctx *fasthttp.RequestCtx, p *principal, _ map[string]string) {
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	ds, err := s.cfg.Storage.List(c, p.Key.OrgID)
	if err != nil {
		s.storageFailure(ctx, err)
		return
	}
	out := make([]map[string]any, 0, len(ds))
	for i := range ds {
		out = append(out, renderDestination(&ds[i]))
	}
	writeJSON(ctx, 200, out) // a bare array, as Etchv's SDKs read it
}

func (s *Server) getDestination(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	d, err := s.cfg.Storage.Get(c, p.Key.OrgID, params["destination_id"])
	if err != nil {
		s.storageFailure(ctx, err)
		return
	}
	writeJSON(ctx, 200, renderDestination(d))
}

func (s *Server) createDestination(ctx *fasthttp.RequestCtx, p *principal, _ map[string]string) {
	if !mayManageStorage(ctx, p) {
		return
	}
	in, aerr := parseDestinationBody(ctx)
	if aerr != nil {
		writeProblem(ctx, aerr.code, aerr.detail)
		return
	}
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	d, err := s.cfg.Storage.Create(c, p.Key.OrgID, in, s.cfg.Clock.Now())
	if err != nil {
		s.storageFailure(ctx, err)
		return
	}
	s.setLocation(ctx, "/storage/destinations/"+d.ID)
	writeJSON(ctx, 201, renderDestination(d))
}

func (s *Server) updateDestination(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	if !mayManageStorage(ctx, p) {
		return
	}
	in, aerr := parseDestinationBody(ctx)
	if aerr != nil {
		writeProblem(ctx, aerr.code, aerr.detail)
		return
	}
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	d, err := s.cfg.Storage.Update(c, p.Key.OrgID, params["destination_id"], in, s.cfg.Clock.Now())
	if err != nil {
		s.storageFailure(ctx, err)
		return
	}
	writeJSON(ctx, 200, renderDestination(d))
}

func (s *Server) deleteDestination(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	if !mayManageStorage(ctx, p) {
		return
	}
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	if err := s.cfg.Storage.Delete(c, p.Key.OrgID, params["destination_id"]); err != nil {
		s.storageFailure(ctx, err)
		return
	}
	ctx.SetStatusCode(204)
}

// verifyDestination runs the probe round trip; 422 storage_verification_failed names the failed step.
func (s *Server) verifyDestination(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	if !mayManageStorage(ctx, p) {
		return
	}
	c, cancel := s.requestContext(ctx, 60*time.Second)
	defer cancel()
	d, step, err := s.cfg.Storage.Verify(c, p.Key.OrgID, params["destination_id"], s.cfg.Clock.Now())
	if err != nil {
		s.storageFailure(ctx, err)
		return
	}
	if step != nil {
		writeProblem(ctx, CodeStorageVerify, step.Error())
		return
	}
	writeJSON(ctx, 200, renderDestination(d))
}

// usableDestination checks a request's storage_destination_id (enabled and verified, this organization's)
// and its storage_key (storagedest.ValidKey).
func (s *Server) usableDestination(ctx *fasthttp.RequestCtx, org, id, key string) *apiError {
	if s.cfg.Storage == nil {
		return newAPIError(CodeStorageDestination, "storage destination %q is unknown or not verified", truncate(id, 64))
	}
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	d, err := s.cfg.Storage.Get(c, org, id)
	if errors.Is(err, storagedest.ErrNotFound) || (err == nil && !d.Usable()) {
		return newAPIError(CodeStorageDestination, "storage destination %q is unknown, disabled or not verified", truncate(id, 64))
	}
	if err != nil {
		return newAPIError(CodeUnavailable, "storage destinations could not be read; retry shortly")
	}
	if key != "" {
		if err := storagedest.ValidKey(d, key); err != nil {
			return newAPIError(CodeInvalidRequest, "storage_key: %v", err)
		}
	}
	return nil
}

// storageDeliveryRoutes: a delivery's state and the owner's "retry now".
func (s *Server) storageDeliveryRoutes() {
	if s.cfg.Storage == nil {
		return
	}
	s.router.handle("GET", "/storage/deliveries/{delivery_id}", s.authed([]string{actors.ScopeStorageRead}, s.getDelivery))
	s.router.handle("POST", "/storage/deliveries/{delivery_id}/retry", s.authed([]string{actors.ScopeStorageWrite}, s.retryDelivery))
	s.router.handle("GET", "/storage/deliveries/{delivery_id}/content", s.authed([]string{actors.ScopeStorageRead}, s.deliveryContent))
}

// renderDelivery is the public shape of a delivery; ent (its outbox entry, when still kept) adds the attempt
// history and the next attempt's time.
func renderDelivery(d *storagedest.Delivery, ent *outbox.Entry) map[string]any {
	uri := ""
	if d.Bucket != "" {
		uri = "s3://" + d.Bucket + "/" + d.Key
	}
	v := map[string]any{
		"id": d.ID, "status": d.Status, "asset_id": strOrNil(assetid.Canonical(d.AssetID, d.RequestID, assetid.KindWatermarked)), "request_id": d.RequestID,
		"destination_id": d.DestinationID, "provider": "s3", "bucket": d.Bucket, "key": d.Key,
		"uri": uri, "public_url": nil, "etag": strOrNil(d.ETag), "attempts": d.Attempts,
		"created_at": d.CreatedAt.UTC().Format(time.RFC3339), "completed_at": nil, "last_error": remoteError(d.LastError),
		"error_code": strOrNil(d.ErrorCode), "next_attempt_at": nil,
	}
	if d.DeliveredAt != nil {
		v["completed_at"] = d.DeliveredAt.UTC().Format(time.RFC3339)
	}
	history := []map[string]any{}
	if ent != nil {
		if ent.Status == outbox.StatusPending && d.Status != storagedest.DeliveryStored {
			v["next_attempt_at"] = ent.NextAt.UTC().Format(time.RFC3339)
		}
		for _, a := range ent.Attempts {
			st := storagedest.DeliveryStored
			switch {
			case a.Error != "" && a.Permanent:
				st = storagedest.DeliveryFailed
			case a.Error != "":
				st = storagedest.DeliveryRetrying
			}
			history = append(history, map[string]any{"at": a.At.UTC().Format(time.RFC3339), "status": st, "error": remoteError(a.Error)})
		}
	}
	v["history"] = history
	return v
}

// effectOf is the outbox effect id of delivery d: a move's own, else derived from the job's request id.
func effectOf(d *storagedest.Delivery) string {
	if d.EffectID != "" {
		return d.EffectID
	}
	return outbox.EffectID("fx_", d.RequestID, actors.OutboxJobStorage)
}

// deliveryEntry is the outbox entry of delivery d (nil once past its retention).
func (s *Server) deliveryEntry(c context.Context, d *storagedest.Delivery) *outbox.Entry {
	ent, err := s.cfg.Outbox.Get(c, effectOf(d))
	if err != nil {
		return nil
	}
	return ent
}

func (s *Server) orgDelivery(ctx *fasthttp.RequestCtx, p *principal, id string) *storagedest.Delivery {
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	d, err := s.cfg.Storage.GetDelivery(c, id)
	if errors.Is(err, storagedest.ErrNotFound) || (err == nil && d.OrgID != p.Key.OrgID) {
		writeProblem(ctx, CodeNotFound, "no such storage delivery (a delivery exists once its job succeeded and the first attempt ran)")
		return nil
	}
	if err != nil {
		s.unavailable(ctx, err)
		return nil
	}
	return d
}

func (s *Server) getDelivery(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	if d := s.orgDelivery(ctx, p, params["delivery_id"]); d != nil {
		c, cancel := s.storeCtx(ctx)
		defer cancel()
		writeJSON(ctx, 200, renderDelivery(d, s.deliveryEntry(c, d)))
	}
}

// retryDelivery re-enqueues a delivery now (its outbox schedule starts over); a stored one is answered as is.
func (s *Server) retryDelivery(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	if !mayManageStorage(ctx, p) {
		return
	}
	d := s.orgDelivery(ctx, p, params["delivery_id"])
	if d == nil {
		return
	}
	if d.Status != storagedest.DeliveryStored {
		c, cancel := s.storeCtx(ctx)
		defer cancel()
		if _, err := s.cfg.Outbox.Redeliver(c, effectOf(d)); err != nil {
			s.unavailable(ctx, err)
			return
		}
		d.Status = storagedest.DeliveryRetrying
	}
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	writeJSON(ctx, 202, renderDelivery(d, s.deliveryEntry(c, d)))
}

// assetStorageJSON is the storage part of a watermarked asset delivered to a customer bucket (spec 2.6; the
// names Etchv's SDKs read). Absent on every other asset.
type assetStorageJSON struct {
	StorageProvider      string  `json:"storage_provider,omitempty"`
	StorageDestinationID *string `json:"storage_destination_id,omitempty"`
	StorageDeliveryID    *string `json:"storage_delivery_id,omitempty"`
	StorageStatus        string  `json:"storage_status,omitempty"`
	StorageKey           *string `json:"storage_key,omitempty"`
	StorageETag          *string `json:"storage_etag,omitempty"`
	StorageDeliveredAt   *string `json:"storage_delivered_at,omitempty"`
	StorageError         *string `json:"storage_error,omitempty"`
	// StagingExpiresAt is until when the delivery can still be retried (absent once stored); StagingDeletedAt
	// is when the hosted copy was removed after the delivery stored the file (docs/storage.md).
	StagingExpiresAt *string `json:"staging_expires_at,omitempty"`
	StagingDeletedAt *string `json:"staging_deleted_at,omitempty"`
}

// storageStatus reads delivery id; before its first attempt there is no record and the status is "queued".
// A store failure answers an empty status (the field is then left out) rather than failing the read.
func (s *Server) storageStatus(ctx *fasthttp.RequestCtx, id string) *storagedest.Delivery {
	if s.cfg.Storage == nil {
		return &storagedest.Delivery{ID: id}
	}
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	d, err := s.cfg.Storage.GetDelivery(c, id)
	switch {
	case errors.Is(err, storagedest.ErrNotFound):
		return &storagedest.Delivery{ID: id, Status: storagedest.DeliveryQueued}
	case err != nil:
		return &storagedest.Delivery{ID: id}
	}
	return d
}

// withStorage adds the storage fields of a watermarked asset whose job named a destination, or that was
// moved to one.
func (s *Server) withStorage(ctx *fasthttp.RequestCtx, out assetJSON, as *actors.Asset) assetJSON {
	id := as.DeliveryID()
	if id == "" {
		return out
	}
	d := s.storageStatus(ctx, id)
	st := &out.assetStorageJSON
	st.StorageProvider, st.StorageDestinationID, st.StorageDeliveryID = "s3", &as.StorageDestinationID, &id
	st.StorageStatus, st.StorageKey, st.StorageETag, st.StorageError = d.Status, optional(d.Key), optional(d.ETag), remoteError(d.LastError)
	if d.DeliveredAt != nil {
		st.StorageDeliveredAt = optional(d.DeliveredAt.UTC().Format(time.RFC3339))
	}
	if d.Status != storagedest.DeliveryStored {
		end := as.CreatedAt.Add(storagedest.StagingWindow)
		if !as.FileExpiresAt.IsZero() && as.FileExpiresAt.Before(end) {
			end = as.FileExpiresAt
		}
		st.StagingExpiresAt = optional(end.UTC().Format(time.RFC3339))
	}
	if as.StagingDeletedAt != nil {
		st.StagingDeletedAt = optional(as.StagingDeletedAt.UTC().Format(time.RFC3339))
	}
	return out
}

// listDestinationDeliveries pages a destination's deliveries newest first: `{items, next_cursor}` (Etchv's
// shape), `after` the last delivery id of the previous page, `limit` 1 to 100 (default 50). It walks the
// outbox's per-destination index (entries are kept 30 days after their delivery ended), so queued deliveries
// whose first attempt has not run are listed too.
func (s *Server) listDestinationDeliveries(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	limit, after, ok := deliveryPageArgs(ctx, validDeliveryID, "a delivery id (std_ and 64 hex characters)")
	if !ok {
		return
	}
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	dest, err := s.cfg.Storage.Get(c, p.Key.OrgID, params["destination_id"])
	if err != nil {
		s.storageFailure(ctx, err)
		return
	}
	items, next := []map[string]any{}, (*string)(nil)
	pos, skipping := "", after != ""
	for scanned := 0; scanned < maxRedeliverScan; {
		ents, np, err := s.cfg.Outbox.List(c, actors.OutboxJobStorage, dest.ID, pos, 200)
		if err != nil {
			s.unavailable(ctx, err)
			return
		}
		scanned += len(ents)
		for _, ent := range ents {
			reqID, id := string(ent.Effect.Payload), ""
			var m storagedest.Move
			if len(reqID) > 0 && reqID[0] == '{' && json.Unmarshal(ent.Effect.Payload, &m) == nil {
				reqID, id = "", m.DeliveryID
			} else {
				id = jobstate.StorageDeliveryIDFor(reqID)
			}
			if skipping {
				skipping = id != after
				continue
			}
			if len(items) == limit {
				last := items[len(items)-1]["id"].(string)
				next = &last
				goto done
			}
			d, err := s.cfg.Storage.GetDelivery(c, id)
			switch {
			case errors.Is(err, storagedest.ErrNotFound):
				d = &storagedest.Delivery{ID: id, OrgID: p.Key.OrgID, RequestID: reqID, DestinationID: dest.ID,
					Status: storagedest.DeliveryQueued, CreatedAt: ent.Effect.Created}
			case err != nil:
				s.unavailable(ctx, err)
				return
			}
			if d.OrgID != p.Key.OrgID {
				continue
			}
			items = append(items, renderDelivery(d, ent))
		}
		if np == "" {
			break
		}
		pos = np
	}
done:
	ctx.Response.Header.Set("Cache-Control", "no-store")
	writeJSON(ctx, 200, map[string]any{"items": items, "next_cursor": next})
}

// validDeliveryID reports whether id has the form of a delivery id: "std_" and 64 lowercase hex characters.
func validDeliveryID(id string) bool {
	if len(id) != 4+64 || id[:4] != "std_" {
		return false
	}
	for _, c := range id[4:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// maxMoveBody bounds a move request: an asset id and a key.
const maxMoveBody = 4 << 10

// moveToDestination moves an earlier result (a watermarked asset of the organization whose file is still
// hosted and has no destination yet) into a verified destination: `{asset_id, key?}`, 202 with the delivery,
// which runs through the outbox like a job's own (conditional create, retries, the hosted copy removed once
// stored, the final event to the job's webhook). A result has one destination: the asset is claimed for the
// delivery before it is queued, the same asset, destination and key again answer the same delivery, another
// destination or key is 409 storage_destination_conflict. Default key: <asset id>/<file name>.
func (s *Server) moveToDestination(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	if !mayManageStorage(ctx, p) {
		return
	}
	if !jsonBodyType(string(ctx.Request.Header.ContentType())) {
		writeProblem(ctx, CodeUnsupportedMedia, "send the body as application/json")
		return
	}
	body := ctx.PostBody()
	if len(body) > maxMoveBody {
		writeProblem(ctx, CodeTooLarge, "a move body is at most 4 KiB")
		return
	}
	var req struct {
		AssetID string `json:"asset_id"`
		Key     string `json:"key"`
	}
	if aerr := decodeObject(body, &req, `{"asset_id": "ast_...", "key": "..."}`); aerr != nil {
		writeProblem(ctx, aerr.code, aerr.detail)
		return
	}
	if req.AssetID == "" {
		writeProblem(ctx, CodeInvalidRequest, "asset_id is required")
		return
	}
	dstID := params["destination_id"]
	if aerr := s.usableDestination(ctx, p.Key.OrgID, dstID, req.Key); aerr != nil {
		writeProblem(ctx, aerr.code, aerr.detail)
		return
	}
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	now := s.cfg.Clock.Now()
	as, _, err := s.assets().Get(c, req.AssetID)
	switch {
	case errors.Is(err, persistence.ErrNotFound) || err == nil && (as.OrgID != p.Key.OrgID || as.DeletedAt != nil):
		writeProblem(ctx, CodeAssetNotFound, "no such asset")
		return
	case err != nil:
		s.unavailable(ctx, err)
		return
	case as.Kind != actors.AssetWatermarked:
		writeProblem(ctx, CodeInvalidRequest, "only watermarked results can be moved; original uploads stay hosted here")
		return
	}
	key := req.Key
	if key == "" {
		key = storagedest.DefaultMoveKey(as.ID, as.Filename)
	}
	m := storagedest.Move{DeliveryID: storagedest.MoveDeliveryID(as.ID, dstID, key), OrgID: p.Key.OrgID, AssetID: as.ID,
		DestinationID: dstID, Key: key}
	switch cur := as.DeliveryID(); {
	case cur != "" && cur != m.DeliveryID:
		writeProblem(ctx, CodeStorageConflict, "the result already has a storage destination (delivery "+cur+"); a result has one destination and key")
		return
	case cur == "" && !as.FileAvailable(now):
		writeProblem(ctx, CodeAssetFileExpired, "the asset's file is no longer hosted; nothing can be moved")
		return
	}
	// The claim first: it makes the result this delivery's, so that two moves racing cannot both take it. A
	// crash before the effect is added is finished by the same move again (the claim is then a no-op).
	if _, err := s.assets().ClaimDelivery(c, p.Key.OrgID, as.ID, dstID, m.DeliveryID); errors.Is(err, actors.ErrAssetHasDestination) {
		writeProblem(ctx, CodeStorageConflict, "the result already has a storage destination; a result has one destination and key")
		return
	} else if errors.Is(err, actors.ErrAssetNotFound) {
		writeProblem(ctx, CodeAssetNotFound, "no such asset")
		return
	} else if err != nil {
		s.unavailable(ctx, err)
		return
	}
	payload, err := json.Marshal(m)
	if err != nil {
		s.unavailable(ctx, err)
		return
	}
	fx := outbox.Effect{ID: outbox.EffectID("fx_", m.DeliveryID, actors.OutboxJobStorage), Kind: actors.OutboxJobStorage,
		Key: dstID, Payload: payload, Created: now}
	// The effect first: a crash before the record leaves a delivery that makes its own record on its first
	// attempt; the record (create-only) lets the delivery be read and retried before that.
	if err := s.cfg.Outbox.Add(c, fx); err != nil {
		s.unavailable(ctx, err)
		return
	}
	d, err := s.cfg.Storage.RecordDelivery(c, storagedest.Delivery{ID: m.DeliveryID, OrgID: m.OrgID, RequestID: as.RequestID,
		AssetID: as.ID, DestinationID: dstID, Status: storagedest.DeliveryQueued, CreatedAt: now, UpdatedAt: now, EffectID: fx.ID},
		func(*storagedest.Delivery) {})
	if err != nil {
		s.unavailable(ctx, err)
		return
	}
	ctx.Response.Header.Set("Location", "/storage/deliveries/"+d.ID)
	writeJSON(ctx, 202, renderDelivery(d, s.deliveryEntry(c, d)))
}

// deliveryContent streams a stored delivery's object back from the customer's bucket (openDelivered).
func (s *Server) deliveryContent(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	d := s.orgDelivery(ctx, p, params["delivery_id"])
	if d == nil {
		return
	}
	body, obj := s.openDelivered(ctx, p.Key.OrgID, d)
	if body == nil {
		return
	}
	ctx.Response.Header.Set("ETag", `"`+strings.Trim(obj.ETag, `"`)+`"`)
	ctx.Response.Header.Set("Cache-Control", "no-store")
	// The type is the delivered result's, from its asset record, never the bucket's answer: whoever controls
	// the bucket (or its server) can change an object's Content-Type without changing its ETag (a copy onto
	// itself), and a result served as text/html under the console (/console/api/...) is a page of the
	// attacker's making on the console's origin. nosniff keeps browsers from guessing another.
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.SetContentType(s.deliveredContentType(ctx, d))
	ctx.SetStatusCode(200)
	sendBlobBody(ctx, body, obj.Size)
}

// deliveredContentType is the content type of delivery d's result: its asset's (one of the output types
// this service writes), else application/octet-stream.
func (s *Server) deliveredContentType(ctx *fasthttp.RequestCtx, d *storagedest.Delivery) string {
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	if as, _, err := s.assets().Get(c, d.AssetID); err == nil && as.ContentType != "" {
		return as.ContentType
	}
	return "application/octet-stream"
}

// openDelivered opens the object of delivery d in its bucket for streaming, checked against what was
// delivered: an object whose ETag differs (replaced in the bucket since) is refused rather than passed off as
// the delivered result. It serves GET /storage/deliveries/{id}/content, and the asset's content and the job's
// result once staging ended (the file is then only in the bucket). When it cannot, it writes the problem
// (410 storage_object_unavailable, 503 naming the step) and returns nil.
func (s *Server) openDelivered(ctx *fasthttp.RequestCtx, orgID string, d *storagedest.Delivery) (*blobBody, *storagedest.Object) {
	if d.Status != storagedest.DeliveryStored {
		writeProblem(ctx, CodeStorageObjectGone, "the delivery is "+d.Status+", not stored: there is no object to read")
		return nil, nil
	}
	c, cancel := s.requestContext(ctx, streamTimeout)
	dest, err := s.cfg.Storage.Get(c, orgID, d.DestinationID)
	if err != nil {
		cancel()
		if errors.Is(err, storagedest.ErrNotFound) {
			writeProblem(ctx, CodeStorageObjectGone, "the delivery's storage destination was deleted")
			return nil, nil
		}
		s.unavailable(ctx, err)
		return nil, nil
	}
	obj, err := s.cfg.Storage.Open(c, dest, d.Key)
	var step *storagedest.StepError
	switch {
	case errors.Is(err, storagedest.ErrObjectGone):
		cancel()
		writeProblem(ctx, CodeStorageObjectGone, "the object "+d.Key+" is no longer in the bucket")
		return nil, nil
	case errors.As(err, &step):
		cancel()
		ctx.Response.Header.Set("Retry-After", "30")
		writeProblem(ctx, CodeUnavailable, "the bucket could not be read: "+step.Error())
		return nil, nil
	case err != nil:
		cancel()
		s.unavailable(ctx, err)
		return nil, nil
	}
	if strings.Trim(obj.ETag, `"`) != strings.Trim(d.ETag, `"`) {
		_ = obj.Body.Close()
		cancel()
		writeProblem(ctx, CodeStorageObjectGone, "the object "+d.Key+" changed in the bucket since it was delivered (its ETag differs)")
		return nil, nil
	}
	return &blobBody{ReadCloser: obj.Body, cancel: cancel}, obj
}

// openStoredAsset opens the bucket copy of an asset whose staging ended (openDelivered); nil after writing
// the problem.
func (s *Server) openStoredAsset(ctx *fasthttp.RequestCtx, orgID string, as *actors.Asset) (*blobBody, *storagedest.Object) {
	if s.cfg.Storage == nil {
		writeProblem(ctx, CodeStorageObjectGone, "the file is stored in a customer bucket and this node reads no storage destinations")
		return nil, nil
	}
	c, cancel := s.storeCtx(ctx)
	d, err := s.cfg.Storage.GetDelivery(c, as.DeliveryID())
	cancel()
	if err != nil {
		s.unavailable(ctx, err) // a stored asset's delivery record exists: anything else is a storage failure
		return nil, nil
	}
	return s.openDelivered(ctx, orgID, d)
}
