package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"filigrane/internal/clock"
)

// EffectKind is the outbox kind of webhook events; the effect's Key is the endpoint id, so events to one
// endpoint are attempted in creation order where possible.
const EffectKind = "webhook.event"

// Schedule is the wait before each retry: 10 attempts over about 22 hours (Etchv's documented schedule).
var Schedule = []time.Duration{30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 4 * time.Hour, 6 * time.Hour, 8 * time.Hour}

// Envelope is the payload of a webhook effect: who receives it and the exact body, fixed when the event was
// made so that every attempt and redelivery sends the same bytes.
type Envelope struct {
	OrgID      string          `json:"org_id"`
	EndpointID string          `json:"endpoint_id"`
	RequestID  string          `json:"request_id,omitempty"`
	Type       string          `json:"type"`
	Event      json.RawMessage `json:"event"`
}

// NewEnvelope wraps ev for endpoint endpointID of orgID.
func NewEnvelope(orgID, endpointID, requestID string, ev Event) (Envelope, []byte, error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return Envelope{}, nil, fmt.Errorf("encode event %s: %w", ev.ID, err)
	}
	env := Envelope{OrgID: orgID, EndpointID: endpointID, RequestID: requestID, Type: ev.Type, Event: body}
	payload, err := json.Marshal(env)
	if err != nil {
		return Envelope{}, nil, fmt.Errorf("encode envelope of %s: %w", ev.ID, err)
	}
	return env, payload, nil
}

// DecodeEnvelope reads an effect payload.
func DecodeEnvelope(payload []byte) (Envelope, error) {
	var env Envelope
	if err := json.Unmarshal(payload, &env); err != nil {
		return Envelope{}, fmt.Errorf("decode webhook envelope: %w", err)
	}
	if env.OrgID == "" || env.EndpointID == "" || len(env.Event) == 0 {
		return Envelope{}, errors.New("decode webhook envelope: org, endpoint or event missing")
	}
	return env, nil
}

// ErrCancelled: the endpoint was deleted or disabled; the delivery ends without further attempts.
var ErrCancelled = errors.New("webhooks: endpoint deleted or disabled; delivery cancelled")

// Metrics are the delivery collectors.
type Metrics struct {
	deliveries *prometheus.CounterVec
	age        prometheus.Histogram
}

// NewMetrics builds the collectors and registers them on reg (the node's registry).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "filigrane_webhook_deliveries_total",
			Help: "Webhook delivery attempts by outcome: delivered (2xx), failed (retried later), cancelled (endpoint gone or disabled), filtered (the endpoint takes other event types).",
		}, []string{"outcome"}),
		age: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "filigrane_webhook_queue_age_seconds",
			Help: "Age of a webhook event (since it was made) when a delivery attempt starts.",
			Buckets: []float64{1, 5, 30, 60, 150, 300, 900, 1800, 3600, 7200, 14400, 28800, 57600, 86400,
				172800},
		}),
	}
	if reg != nil {
		reg.MustRegister(m.deliveries, m.age)
	}
	return m
}

func (m *Metrics) outcome(o string) {
	if m != nil {
		m.deliveries.WithLabelValues(o).Inc()
	}
}

// Deliverer makes one delivery attempt of an envelope: it reads the endpoint (deleted or disabled ends the
// delivery), signs with the secrets valid now and posts.
type Deliverer struct {
	Endpoints Endpoints
	Sender    *Sender
	Clock     clock.Clock
	Metrics   *Metrics
}

// Deliver makes one attempt. created is when the event was made (for the queue-age metric). It returns
// ErrCancelled (wrapped) when the endpoint is gone or disabled: no later attempt can succeed.
func (d *Deliverer) Deliver(ctx context.Context, env Envelope, eventID string, created time.Time) (Attempt, error) {
	now := d.Clock.Now()
	if d.Metrics != nil {
		d.Metrics.age.Observe(max(now.Sub(created), 0).Seconds())
	}
	ep, err := d.Endpoints.Get(ctx, env.OrgID, env.EndpointID)
	switch {
	case errors.Is(err, ErrNotFound):
		d.Metrics.outcome("cancelled")
		return Attempt{}, fmt.Errorf("%w (endpoint %s was deleted)", ErrCancelled, env.EndpointID)
	case err != nil:
		d.Metrics.outcome("failed")
		return Attempt{}, err
	case !ep.Enabled:
		d.Metrics.outcome("cancelled")
		return Attempt{}, fmt.Errorf("%w (endpoint %s is disabled)", ErrCancelled, env.EndpointID)
	}
	if !ep.Wants(env.Type) {
		d.Metrics.outcome("filtered")
		return Attempt{Filtered: true}, nil // the endpoint's event filter leaves this type out: nothing to send
	}
	att, err := d.Sender.Post(ctx, ep.URL, ep.Secrets(now), eventID, env.RequestID, env.Event, now)
	if err != nil {
		d.Metrics.outcome("failed")
		return att, err
	}
	d.Metrics.outcome("delivered")
	return att, nil
}
