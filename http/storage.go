package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/actors/assetid"
	"filigrane/actors/outbox"
	"filigrane/actors/storagedest"
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
}

func parseDestinationBody(ctx *fasthttp.RequestCtx) (storagedest.Input, *apiError) {
	body := ctx.PostBody()
	if len(body) > maxDestinationBody {
		return storagedest.Input{}, newAPIError(CodeTooLarge, "a storage destination body is at most 16 KiB")
	}
	var b destinationBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return storagedest.Input{}, newAPIError(CodeMalformedJSON, "the body must be a JSON object of the documented fields: %v", err)
	}
	if b.Provider != "" && b.Provider != "s3" {
		return storagedest.Input{}, newAPIError(CodeInvalidRequest, "provider must be s3 (any S3-compatible endpoint)")
	}
	return storagedest.Input{Name: b.Name, Endpoint: b.Endpoint, Region: b.Region, Bucket: b.Bucket, Prefix: b.Prefix,
		AccessKey: b.AccessKeyID, SecretKey: b.SecretAccessKey, Secure: b.Secure, PathStyle: b.PathStyle, Enabled: b.Enabled}, nil
}

// renderDestination is the public shape: no credentials, only whether it is usable.
func renderDestination(d *storagedest.Destination) map[string]any {
	v := map[string]any{
		"id": d.ID, "name": d.Name, "provider": "s3", "endpoint": d.Endpoint, "secure": d.Secure, "region": d.Region,
		"bucket": d.Bucket, "prefix": d.Prefix, "path_style": d.PathStyle, "enabled": d.Enabled,
		"verified_at": nil, "last_error": nil, "created_at": d.CreatedAt.UTC().Format(time.RFC3339),
		"updated_at": d.UpdatedAt.UTC().Format(time.RFC3339),
	}
	if d.VerifiedAt != nil {
		v["verified_at"] = d.VerifiedAt.UTC().Format(time.RFC3339)
	}
	if d.LastError != "" {
		v["last_error"] = d.LastError
	}
	return v
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
	c, cancel := s.storeCtx()
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
	c, cancel := s.storeCtx()
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
	c, cancel := s.storeCtx()
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
	c, cancel := s.storeCtx()
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
	c, cancel := s.storeCtx()
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
	c, cancel := s.requestContext(60 * time.Second)
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
func (s *Server) usableDestination(org, id, key string) *apiError {
	if s.cfg.Storage == nil {
		return newAPIError(CodeStorageDestination, "storage destination %q is unknown or not verified", truncate(id, 64))
	}
	c, cancel := s.storeCtx()
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
}

func renderDelivery(d *storagedest.Delivery) map[string]any {
	v := map[string]any{
		"id": d.ID, "status": d.Status, "asset_id": strOrNil(assetid.Canonical(d.AssetID, d.RequestID, assetid.KindWatermarked)), "request_id": d.RequestID,
		"destination_id": d.DestinationID, "provider": "s3", "bucket": d.Bucket, "key": d.Key,
		"uri": "s3://" + d.Bucket + "/" + d.Key, "etag": strOrNil(d.ETag), "attempts": d.Attempts,
		"created_at": d.CreatedAt.UTC().Format(time.RFC3339), "completed_at": nil, "last_error": strOrNil(d.LastError),
	}
	if d.DeliveredAt != nil {
		v["completed_at"] = d.DeliveredAt.UTC().Format(time.RFC3339)
	}
	return v
}

func (s *Server) orgDelivery(ctx *fasthttp.RequestCtx, p *principal, id string) *storagedest.Delivery {
	c, cancel := s.storeCtx()
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
		writeJSON(ctx, 200, renderDelivery(d))
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
		c, cancel := s.storeCtx()
		defer cancel()
		if _, err := s.cfg.Outbox.Redeliver(c, outbox.EffectID("fx_", d.RequestID, actors.OutboxJobStorage)); err != nil {
			s.unavailable(ctx, err)
			return
		}
		d.Status = storagedest.DeliveryRetrying
	}
	writeJSON(ctx, 202, renderDelivery(d))
}
