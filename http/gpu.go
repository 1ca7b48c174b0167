package http

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"time"

	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/actors/webhooks"
	"filigrane/gpu"
)

// maxWakeBody bounds the optional JSON body of a wake call.
const maxWakeBody = 4 << 10

func (s *Server) gpuRoutes() {
	either := []string{actors.ScopeEmbed, actors.ScopeDetect}
	s.router.handle("GET", "/accelerators/gpu", s.authed(either, s.gpuStatus))
	s.router.handle("POST", "/accelerators/gpu/wake", s.authed(either, s.gpuWake))
}

// acceleratorStatus is spec 2.7.
type acceleratorStatus struct {
	Accelerator string  `json:"accelerator"`
	Status      string  `json:"status"`
	WarmUntil   *string `json:"warm_until"`
	ReadyAt     *string `json:"ready_at"`
}

func renderGPU(st gpu.State) acceleratorStatus {
	out := acceleratorStatus{Accelerator: "gpu", Status: string(st.Status)}
	if st.Status == gpu.StatusReady || st.Status == gpu.StatusStarting {
		w := st.WarmUntil.UTC().Format(time.RFC3339)
		r := st.ReadyAt.UTC().Format(time.RFC3339)
		out.WarmUntil, out.ReadyAt = &w, &r
	}
	return out
}

// GPUState is what the edge needs of the node's GPU devices (gpu.Fleet, gpu.Tracker): read the state
// without starting anything, and wake.
type GPUState interface {
	Snapshot(now time.Time) gpu.State
	Wake(now time.Time) gpu.State
}

func (s *Server) gpuState() GPUState {
	if s.cfg.GPU == nil {
		return gpu.NewTracker(gpu.NewState(false, 0))
	}
	return s.cfg.GPU
}

// gpuStatus reports the accelerator; it starts nothing and costs nothing.
func (s *Server) gpuStatus(ctx *fasthttp.RequestCtx, p *principal, _ map[string]string) {
	now := s.cfg.Clock.Now()
	st := s.gpuState().Snapshot(now)
	s.flushWakeups(ctx, st, now)
	writeJSON(ctx, 200, renderGPU(st))
}

// flushWakeups sends the accelerator.ready events of wake-up calls that waited for a starting GPU once this
// node sees it ready. The device's own ready hook (gpu.Fleet.OnReady, wired by the node) does this when the
// context opens; this catches a GPU state that becomes ready by time alone, and hand-overs that failed.
func (s *Server) flushWakeups(ctx *fasthttp.RequestCtx, st gpu.State, now time.Time) {
	if s.cfg.Wakeups == nil || st.Status != gpu.StatusReady || s.cfg.Wakeups.Pending() == 0 {
		return
	}
	c, cancel := s.requestContext(ctx, s.cfg.ActorTimeout)
	defer cancel()
	if err := s.cfg.Wakeups.Ready(c, st.ReadyAt, st.WarmUntil, now); err != nil {
		s.log(ctx).Warn().Err(err).Msg("hand over accelerator.ready events; kept for the next try")
	}
}

// gpuWake wakes the accelerator for plans with GPU access; it costs no credits.
func (s *Server) gpuWake(ctx *fasthttp.RequestCtx, p *principal, _ map[string]string) {
	if !p.Plan.GPU {
		writeProblem(ctx, CodeForbiddenPlan, "the "+p.Plan.Name+" plan does not include GPU processing")
		return
	}
	if !jsonBodyType(string(ctx.Request.Header.ContentType())) {
		writeProblem(ctx, CodeUnsupportedMedia, "send the body as application/json, or no body")
		return
	}
	var body struct {
		WebhookID string `json:"webhook_id"`
	}
	raw, err := io.ReadAll(io.LimitReader(bodyReader(ctx), maxWakeBody+1))
	if err != nil {
		writeProblem(ctx, CodeBadRequest, "the body could not be read")
		return
	}
	if len(raw) > maxWakeBody {
		writeProblem(ctx, CodeTooLarge, "the body exceeds 4 KB")
		return
	}
	if len(raw) > 0 {
		if aerr := decodeObject(raw, &body, `{"webhook_id": "wh_..."}`); aerr != nil {
			writeProblem(ctx, aerr.code, aerr.detail)
			return
		}
	}
	if body.WebhookID != "" {
		if aerr := s.usableWebhook(ctx, p, body.WebhookID); aerr != nil {
			writeProblem(ctx, aerr.code, aerr.detail)
			return
		}
	}
	now := s.cfg.Clock.Now()
	state := s.gpuState().Wake(now)
	s.flushWakeups(ctx, state, now)
	st := renderGPU(state)
	switch {
	case body.WebhookID == "":
	case st.Status == string(gpu.StatusReady):
		// Already ready: the accelerator.ready event is recorded at once.
		if aerr := s.recordAcceleratorReady(ctx, p, body.WebhookID, st, now); aerr != nil {
			writeProblem(ctx, aerr.code, aerr.detail)
			return
		}
	case st.Status == string(gpu.StatusStarting) && s.cfg.Wakeups != nil:
		// Starting: the call waits on this node until the GPU becomes ready (docs/webhooks.md).
		id, err := newWakeID()
		if err != nil {
			writeProblem(ctx, CodeUnavailable, "the wake-up could not be recorded; retry")
			return
		}
		s.cfg.Wakeups.Add(p.Key.OrgID, body.WebhookID, id, now)
	}
	writeJSON(ctx, 200, st)
}

// newWakeID names one wake-up call: each call is its own wake-up, so each gets its own event.
func newWakeID() (string, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	return "wake_" + hex.EncodeToString(raw[:]), nil
}

// recordAcceleratorReady hands the accelerator.ready event of this wake-up call to the outbox, which
// delivers it to the endpoint. Each call is its own wake-up (a fresh id), so each gets its own event.
func (s *Server) recordAcceleratorReady(ctx *fasthttp.RequestCtx, p *principal, endpointID string, st acceleratorStatus, now time.Time) *apiError {
	id, err := newWakeID()
	if err != nil {
		return newAPIError(CodeUnavailable, "the wake-up could not be recorded; retry")
	}
	e, err := webhooks.AcceleratorReadyEffect(p.Key.OrgID, endpointID, webhooks.AcceleratorReady{
		ID: id, Accelerator: st.Accelerator, Status: st.Status,
		ReadyAt: st.ReadyAt, WarmUntil: st.WarmUntil}, now)
	if err == nil && s.cfg.Outbox.Store == nil {
		err = errors.New("no outbox on this node")
	}
	if err == nil {
		c, cancel := s.requestContext(ctx, s.cfg.ActorTimeout)
		defer cancel()
		err = s.cfg.Outbox.Add(c, e)
	}
	if err != nil {
		s.log(ctx).Error().Err(err).Msg("record accelerator.ready event")
		return newAPIError(CodeUnavailable, "the accelerator.ready event could not be recorded; retry")
	}
	return nil
}
