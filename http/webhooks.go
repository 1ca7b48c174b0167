package http

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/actors/outbox"
	"filigrane/actors/webhooks"
)

// Delivery log page sizes (Etchv: 50 a page).
const (
	defaultDeliveryPage = 50
	maxDeliveryPage     = 100
	maxWebhookBody      = 16 << 10
	// maxRedeliverScan bounds the log entries a redelivery looks through to find its event.
	maxRedeliverScan = 5000
)

// webhookRoutes registers webhook endpoint management and the delivery log (paths and shapes of Etchv's
// SDKs; docs/webhooks.md).
func (s *Server) webhookRoutes() {
	read := []string{actors.ScopeWebhooksRead}
	write := []string{actors.ScopeWebhooksWrite}
	s.router.handle("GET", "/webhooks", s.authed(read, s.listWebhooks))
	s.router.handle("POST", "/webhooks", s.authed(write, s.ownerAdmin(s.createWebhook)))
	s.router.handle("GET", "/webhooks/{id}", s.authed(read, s.getWebhook))
	s.router.handle("PATCH", "/webhooks/{id}", s.authed(write, s.ownerAdmin(s.patchWebhook)))
	s.router.handle("DELETE", "/webhooks/{id}", s.authed(write, s.ownerAdmin(s.deleteWebhook)))
	s.router.handle("POST", "/webhooks/{id}/rotate-secret", s.authed(write, s.ownerAdmin(s.rotateWebhook)))
	s.router.handle("GET", "/webhooks/{id}/deliveries", s.authed(read, s.listDeliveries))
	s.router.handle("POST", "/webhooks/{id}/deliveries/{event_id}/redeliver", s.authed(write, s.ownerAdmin(s.redeliver)))
}

type principalHandler = func(*fasthttp.RequestCtx, *principal, map[string]string)

// ownerAdmin refuses members that are not owner or admin (spec 5: webhooks:write is owner/admin only).
func (s *Server) ownerAdmin(h principalHandler) principalHandler {
	return func(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
		if p.Role != actors.RoleOwner && p.Role != actors.RoleAdmin {
			writeProblem(ctx, CodeForbiddenRole, "managing webhooks needs an owner or admin member's key; this key's member is "+string(p.Role))
			return
		}
		h(ctx, p, params)
	}
}

func (s *Server) endpoints() webhooks.Endpoints {
	return webhooks.Endpoints{Store: s.cfg.Store, Clock: s.cfg.Clock}
}

// usableWebhook checks that a request's webhook_id names an enabled endpoint of the caller's organization:
// 404 otherwise, before anything is created.
func (s *Server) usableWebhook(ctx *fasthttp.RequestCtx, p *principal, id string) *apiError {
	c, cancel := s.requestContext(ctx, s.cfg.ActorTimeout)
	defer cancel()
	_, err := s.endpoints().Usable(c, p.Key.OrgID, id)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, webhooks.ErrNotFound), errors.Is(err, webhooks.ErrDisabled):
		return newAPIError(CodeWebhookNotFound, "webhook %q does not exist or is disabled", truncate(id, 64))
	}
	s.log(ctx).Error().Err(err).Msg("read webhook endpoints")
	return newAPIError(CodeUnavailable, "the webhook endpoint could not be checked in time; retry")
}

// webhookJSON is an endpoint as the API shows it; SigningSecret only when it was just made.
type webhookJSON struct {
	ID            string   `json:"id"`
	URL           string   `json:"url"`
	Description   string   `json:"description"`
	Events        []string `json:"events"`
	Enabled       bool     `json:"enabled"`
	CreatedAt     string   `json:"created_at"`
	UpdatedAt     string   `json:"updated_at"`
	SigningSecret string   `json:"signing_secret,omitempty"`
	// PreviousSecretExpiresAt is when the secret before the last rotation stops signing; null outside an
	// overlap.
	PreviousSecretExpiresAt *string `json:"previous_secret_expires_at"`
}

func (s *Server) renderWebhook(ep webhooks.Endpoint, withSecret bool) webhookJSON {
	out := webhookJSON{ID: ep.ID, URL: ep.URL, Description: ep.Description, Events: ep.Events, Enabled: ep.Enabled,
		CreatedAt: ep.CreatedAt.UTC().Format(time.RFC3339), UpdatedAt: ep.UpdatedAt.UTC().Format(time.RFC3339)}
	if out.Events == nil {
		out.Events = []string{}
	}
	if withSecret {
		out.SigningSecret = ep.Secret
	}
	if ep.PreviousSecret != "" && s.cfg.Clock.Now().Before(ep.PreviousUntil) {
		out.PreviousSecretExpiresAt = optional(ep.PreviousUntil.UTC().Format(time.RFC3339))
	}
	return out
}

func (s *Server) webhookFailure(ctx *fasthttp.RequestCtx, err error) {
	switch {
	case errors.Is(err, webhooks.ErrNotFound):
		writeProblem(ctx, CodeNotFound, "no such webhook endpoint")
	case errors.Is(err, webhooks.ErrLimit):
		writeProblem(ctx, CodeInvalidRequest, "an organization has at most 10 webhook endpoints; delete one first")
	case errors.Is(err, webhooks.ErrInvalid):
		writeProblem(ctx, CodeInvalidRequest, err.Error())
	default:
		s.unavailable(ctx, err)
	}
}

// readWebhookBody decodes a small JSON object into v, refusing unknown fields.
func readWebhookBody(ctx *fasthttp.RequestCtx, v any) bool {
	if !jsonBodyType(string(ctx.Request.Header.ContentType())) {
		answerBodyError(ctx, newAPIError(CodeUnsupportedMedia, "send the body as application/json"))
		return false
	}
	raw, err := readLimited(ctx, maxWebhookBody)
	if err != nil {
		answerBodyError(ctx, err)
		return false
	}
	if aerr := decodeObject(raw, v, "a JSON object of the documented fields (docs/webhooks.md)"); aerr != nil {
		writeProblem(ctx, aerr.code, aerr.detail)
		return false
	}
	return true
}

func readLimited(ctx *fasthttp.RequestCtx, limit int) ([]byte, *apiError) {
	if cl := ctx.Request.Header.ContentLength(); cl > limit {
		return nil, newAPIError(CodeTooLarge, "the body exceeds %d bytes", limit)
	}
	buf := make([]byte, 0, 512)
	r := bodyReader(ctx)
	tmp := make([]byte, 4096)
	for {
		n, err := r.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if len(buf) > limit {
			return nil, newAPIError(CodeTooLarge, "the body exceeds %d bytes", limit)
		}
		if err != nil {
			break
		}
	}
	return buf, nil
}

func (s *Server) listWebhooks(ctx *fasthttp.RequestCtx, p *principal, _ map[string]string) {
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	eps, err := s.endpoints().List(c, p.Key.OrgID)
	if err != nil {
		s.unavailable(ctx, err)
		return
	}
	out := make([]webhookJSON, 0, len(eps))
	for _, ep := range eps {
		out = append(out, s.renderWebhook(ep, false))
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	writeJSON(ctx, 200, out) // a bare array, as Etchv's SDKs read it
}

func (s *Server) createWebhook(ctx *fasthttp.RequestCtx, p *principal, _ map[string]string) {
	var body struct {
		URL         string   `json:"url"`
		Description string   `json:"description"`
		Events      []string `json:"events"`
	}
	if !readWebhookBody(ctx, &body) {
		return
	}
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	ep, err := s.endpoints().Create(c, p.Key.OrgID, webhooks.Spec{URL: body.URL, Description: body.Description, Events: body.Events})
	if err != nil {
		s.webhookFailure(ctx, err)
		return
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	s.setLocation(ctx, "/webhooks/"+ep.ID)
	writeJSON(ctx, 201, s.renderWebhook(ep, true))
}

func (s *Server) getWebhook(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	ep, err := s.endpoints().Get(c, p.Key.OrgID, params["id"])
	if err != nil {
		s.webhookFailure(ctx, err)
		return
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	writeJSON(ctx, 200, s.renderWebhook(ep, false))
}

func (s *Server) patchWebhook(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	var body struct {
		URL         *string   `json:"url"`
		Description *string   `json:"description"`
		Events      *[]string `json:"events"`
		Enabled     *bool     `json:"enabled"`
	}
	if !readWebhookBody(ctx, &body) {
		return
	}
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	ep, err := s.endpoints().Update(c, p.Key.OrgID, params["id"], webhooks.Patch{URL: body.URL, Description: body.Description,
		Events: body.Events, Enabled: body.Enabled})
	if err != nil {
		s.webhookFailure(ctx, err)
		return
	}
	writeJSON(ctx, 200, s.renderWebhook(ep, false))
}

func (s *Server) deleteWebhook(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	if err := s.endpoints().Delete(c, p.Key.OrgID, params["id"]); err != nil {
		s.webhookFailure(ctx, err)
		return
	}
	ctx.SetStatusCode(204)
}

func (s *Server) rotateWebhook(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	ep, err := s.endpoints().Rotate(c, p.Key.OrgID, params["id"])
	if err != nil {
		s.webhookFailure(ctx, err)
		return
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	writeJSON(ctx, 200, s.renderWebhook(ep, true))
}

// deliveryJSON is one event's delivery to an endpoint (Etchv's delivery shape).
type deliveryJSON struct {
	ID string `json:"id"`
	// RequestID is the job's request id; null for events that no job caused (batch, accelerator).
	RequestID     *string           `json:"request_id"`
	Status        string            `json:"status"`
	Attempts      int               `json:"attempts"`
	CreatedAt     string            `json:"created_at"`
	NextAttemptAt *string           `json:"next_attempt_at"`
	History       []deliveryAttempt `json:"history"`
	Payload       json.RawMessage   `json:"payload"`
}

type deliveryAttempt struct {
	At         string  `json:"at"`
	StatusCode *int    `json:"status_code"`
	DurationMS int64   `json:"duration_ms"`
	Error      *string `json:"error"`
}

// renderDelivery turns an outbox entry of any webhook kind into a delivery of endpoint endpointID of orgID;
// ok is false when its event can no longer be built (its job or batch is gone) or is not this endpoint's.
func (s *Server) renderDelivery(ctx *fasthttp.RequestCtx, orgID, endpointID string, ent *outbox.Entry) (deliveryJSON, bool) {
	c, cancel := s.requestContext(ctx, s.cfg.ActorTimeout)
	defer cancel()
	if filteredOnly(ent) {
		return deliveryJSON{}, false // the endpoint's event filter left it out: never sent, not a delivery
	}
	b, err := webhooks.Build(c, s.cfg.Store, ent.Effect)
	if err != nil || b.Envelope.OrgID != orgID || b.Envelope.EndpointID != endpointID {
		return deliveryJSON{}, false
	}
	d := deliveryJSON{ID: b.EventID, Attempts: ent.Total, Payload: b.Envelope.Event,
		CreatedAt: ent.Effect.Created.UTC().Format(time.RFC3339), History: []deliveryAttempt{}}
	if b.Envelope.RequestID != "" {
		d.RequestID = optional(b.Envelope.RequestID)
	}
	switch {
	case ent.Status == outbox.StatusDelivered:
		d.Status = "delivered"
	case ent.Status == outbox.StatusDead && len(ent.Attempts) > 0 && ent.Attempts[len(ent.Attempts)-1].Permanent:
		d.Status = "cancelled"
	case ent.Status == outbox.StatusDead:
		d.Status = "exhausted"
	case ent.Round == 0:
		d.Status = "queued"
	default:
		d.Status = "retrying"
	}
	if ent.Status == outbox.StatusPending {
		d.NextAttemptAt = optional(ent.NextAt.UTC().Format(time.RFC3339))
	}
	for _, a := range ent.Attempts {
		h := deliveryAttempt{At: a.At.UTC().Format(time.RFC3339), DurationMS: a.Duration.Milliseconds()}
		if n, ok := httpStatusOf(a.Detail); ok {
			h.StatusCode = &n
		}
		h.Error = remoteError(a.Error)
		d.History = append(d.History, h)
	}
	return d, true
}

// filteredOnly reports whether every attempt of ent found its event type filtered out by the endpoint.
func filteredOnly(ent *outbox.Entry) bool {
	for _, a := range ent.Attempts {
		if a.Detail != webhooks.NoteFiltered {
			return false
		}
	}
	return len(ent.Attempts) > 0
}

// httpStatusOf reads the "HTTP 503" note the webhook handler leaves on an attempt.
func httpStatusOf(detail string) (int, bool) {
	if len(detail) != 8 || detail[:5] != "HTTP " {
		return 0, false
	}
	n, err := strconv.Atoi(detail[5:])
	return n, err == nil
}

// eachDelivery calls fn with the deliveries of endpoint ep of orgID, newest first, over every webhook kind
// (webhooks.Kinds: job, batch and accelerator events alike), until fn returns false. It reads at most
// maxRedeliverScan outbox entries (deliveries are kept 30 days).
func (s *Server) eachDelivery(ctx *fasthttp.RequestCtx, c context.Context, orgID, ep string, fn func(*outbox.Entry, deliveryJSON) bool) error {
	pos := ""
	for scanned := 0; scanned < maxRedeliverScan; {
		ents, np, err := s.cfg.Outbox.ListKinds(c, webhooks.Kinds(), ep, pos, 200)
		if err != nil {
			return err
		}
		scanned += len(ents)
		for _, ent := range ents {
			if d, ok := s.renderDelivery(ctx, orgID, ep, ent); ok && !fn(ent, d) {
				return nil
			}
		}
		if np == "" {
			return nil
		}
		pos = np
	}
	return nil
}

// deliveryPageArgs reads the query of a delivery log's page (a webhook endpoint's, a storage destination's):
// limit, 1 to maxDeliveryPage (default defaultDeliveryPage), and after, the last id of the previous page, which
// valid checks (idWant says what it must be). A bad one is answered with its problem and ok is false.
func deliveryPageArgs(ctx *fasthttp.RequestCtx, valid func(string) bool, idWant string) (limit int, after string, ok bool) {
	q := newListQuery(ctx)
	limit, aerr := q.limit(defaultDeliveryPage, maxDeliveryPage)
	if aerr != nil {
		writeAPIError(ctx, aerr)
		return 0, "", false
	}
	after, _ = q.value("after")
	if after != "" && !valid(after) {
		writeProblem(ctx, CodeInvalidCursor, "after must be "+idWant+" from a previous page")
		return 0, "", false
	}
	return limit, after, true
}

func (s *Server) listDeliveries(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	limit, after, ok := deliveryPageArgs(ctx, webhooks.ValidEventID, "an event id (evt_ and 64 hex characters)")
	if !ok {
		return
	}
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	if _, err := s.endpoints().Get(c, p.Key.OrgID, params["id"]); err != nil {
		s.webhookFailure(ctx, err)
		return
	}
	data, next := []deliveryJSON{}, (*string)(nil)
	skipping := after != ""
	// `after` is the last event id of the previous page, found by walking from the newest.
	err := s.eachDelivery(ctx, c, p.Key.OrgID, params["id"], func(_ *outbox.Entry, d deliveryJSON) bool {
		if skipping {
			skipping = d.ID != after
			return true
		}
		if len(data) == limit {
			next = optional(data[len(data)-1].ID)
			return false
		}
		data = append(data, d)
		return true
	})
	if err != nil {
		s.unavailable(ctx, err)
		return
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	writeJSON(ctx, 200, map[string]any{"data": data, "next_cursor": next})
}

func (s *Server) redeliver(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	evt := params["event_id"]
	if !webhooks.ValidEventID(evt) {
		writeProblem(ctx, CodeNotFound, "no such event")
		return
	}
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	ep, err := s.endpoints().Get(c, p.Key.OrgID, params["id"])
	if err != nil {
		s.webhookFailure(ctx, err)
		return
	}
	if !ep.Enabled {
		writeProblem(ctx, CodeWebhookNotFound, "the endpoint is disabled; enable it before redelivering")
		return
	}
	var found *outbox.Entry
	err = s.eachDelivery(ctx, c, p.Key.OrgID, ep.ID, func(ent *outbox.Entry, d deliveryJSON) bool {
		if d.ID == evt {
			found = ent
		}
		return found == nil
	})
	if err != nil {
		s.unavailable(ctx, err)
		return
	}
	if found == nil {
		writeProblem(ctx, CodeNotFound, "no delivery of that event to this endpoint")
		return
	}
	again, err := s.cfg.Outbox.Redeliver(c, found.Effect.ID)
	if err != nil {
		s.unavailable(ctx, err)
		return
	}
	d, _ := s.renderDelivery(ctx, p.Key.OrgID, ep.ID, again)
	writeJSON(ctx, 202, d)
}
