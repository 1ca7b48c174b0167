// Package webhooks owns webhook endpoints (one durable record per organization holding its at most ten
// endpoints, written with compare-and-set), the events Filigrane sends to them (ids, types, payloads) and the
// HTTP delivery of one event to one endpoint (signed, through the egress guard, bounded in time and size).
//
// When to deliver, retries and the delivery log belong to the outbox (actors/outbox): this package gives it
// a Handler and reads its entries back as deliveries. It must not import fasthttp or decide job state; the job
// actor decides when an event exists.
package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"filigrane/internal/clock"
	"filigrane/internal/egress"
	"filigrane/internal/hiddenchar"
	"filigrane/internal/whsign"
	"filigrane/persistence"
)

// Limits.
const (
	// MaxEndpoints is the most endpoints one organization may have (Etchv's documented limit).
	MaxEndpoints = 10
	// RotationOverlap is how long the previous secret keeps signing after a rotation.
	RotationOverlap = 24 * time.Hour
	// MaxDescription bounds an endpoint's description.
	MaxDescription = 500
)

// prefixEndpoints keys the per-organization record: webhooks/<org_id> -> OrgEndpoints.
const prefixEndpoints = "webhooks/"

// Errors.
var (
	// ErrNotFound: no endpoint with that id in the organization (deleted, another organization's, never made).
	ErrNotFound = errors.New("webhooks: endpoint not found")
	// ErrDisabled: the endpoint exists and is disabled.
	ErrDisabled = errors.New("webhooks: endpoint disabled")
	// ErrLimit: the organization has MaxEndpoints endpoints already.
	ErrLimit = errors.New("webhooks: endpoint limit reached")
	// ErrInvalid wraps a field a caller sent that cannot be stored.
	ErrInvalid = errors.New("webhooks: invalid endpoint")
)

// Endpoint is a webhook endpoint. Secret is kept because every delivery is signed with it; the API shows it
// only when it is made (creation, rotation).
type Endpoint struct {
	ID          string   `msgpack:"id"`
	URL         string   `msgpack:"url"`
	Description string   `msgpack:"description"`
	Events      []string `msgpack:"events"` // empty: every event type
	Enabled     bool     `msgpack:"enabled"`
	Secret      string   `msgpack:"secret"`
	// PreviousSecret signs beside Secret until PreviousUntil (a rotation's overlap).
	PreviousSecret string    `msgpack:"previous_secret,omitempty"`
	PreviousUntil  time.Time `msgpack:"previous_until,omitempty"`
	CreatedAt      time.Time `msgpack:"created_at"`
	UpdatedAt      time.Time `msgpack:"updated_at"`
	RotatedAt      time.Time `msgpack:"rotated_at,omitempty"`
}

// Secrets returns the secrets that sign a delivery at now: the current one first, then the previous one while
// its overlap lasts.
func (e *Endpoint) Secrets(now time.Time) []string {
	if e.PreviousSecret != "" && now.Before(e.PreviousUntil) {
		return []string{e.Secret, e.PreviousSecret}
	}
	return []string{e.Secret}
}

// Wants reports whether the endpoint's filter lets event type through.
func (e *Endpoint) Wants(eventType string) bool {
	return len(e.Events) == 0 || slices.Contains(e.Events, eventType)
}

// OrgEndpoints is the stored record of one organization's endpoints.
type OrgEndpoints struct {
	OrgID     string     `msgpack:"org_id"`
	Endpoints []Endpoint `msgpack:"endpoints"`
}

// SchemaVersion implements persistence.Record.
func (*OrgEndpoints) SchemaVersion() uint16 { return 1 }

func (o *OrgEndpoints) find(id string) int {
	for i := range o.Endpoints {
		if o.Endpoints[i].ID == id {
			return i
		}
	}
	return -1
}

// Endpoints reads and writes endpoint records. It is a value: build one where a Store and a Clock are.
type Endpoints struct {
	Store persistence.Store
	Clock clock.Clock
}

func endpointsKey(orgID string) []byte { return []byte(prefixEndpoints + orgID) }

func (s Endpoints) load(ctx context.Context, orgID string) (*OrgEndpoints, persistence.Version, error) {
	it, err := s.Store.Get(ctx, endpointsKey(orgID))
	if errors.Is(err, persistence.ErrNotFound) {
		return &OrgEndpoints{OrgID: orgID}, persistence.NoVersion, nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("load webhook endpoints of %s: %w", orgID, err)
	}
	var rec OrgEndpoints
	if err := persistence.Unmarshal(it.Value, &rec); err != nil {
		return nil, "", fmt.Errorf("decode webhook endpoints of %s: %w", orgID, err)
	}
	return &rec, it.Version, nil
}

// update applies fn to the organization's record and writes it with compare-and-set, retrying when another
// writer got there first. fn may return an error to write nothing.
func (s Endpoints) update(ctx context.Context, orgID string, fn func(*OrgEndpoints) error) (*OrgEndpoints, error) {
	for range 8 {
		rec, ver, err := s.load(ctx, orgID)
		if err != nil {
			return nil, err
		}
		if err := fn(rec); err != nil {
			return nil, err
		}
		b, err := persistence.Marshal(rec)
		if err != nil {
			return nil, fmt.Errorf("encode webhook endpoints of %s: %w", orgID, err)
		}
		_, err = s.Store.CompareAndSet(ctx, endpointsKey(orgID), ver, b)
		if errors.Is(err, persistence.ErrVersionMismatch) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("save webhook endpoints of %s: %w", orgID, err)
		}
		return rec, nil
	}
	return nil, fmt.Errorf("save webhook endpoints of %s: too much contention: %w", orgID, persistence.ErrVersionMismatch)
}

// NewEndpointID returns "wh_" + 32 random hex characters (the spec's form).
func NewEndpointID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // no randomness left: nothing is safe
	}
	return "wh_" + hex.EncodeToString(b)
}

// ValidID reports whether id has the spec's endpoint id form.
func ValidID(id string) bool {
	rest, ok := strings.CutPrefix(id, "wh_")
	if !ok || len(rest) != 32 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil && strings.ToLower(rest) == rest
}

// Spec is what a caller may set on an endpoint.
type Spec struct {
	URL         string
	Description string
	Events      []string
}

// checkHidden refuses a url or description a caller sends that holds a character which shows nothing or
// reorders the text around it (internal/hiddenchar's rule for names): the console and the API show both, and
// "https://example.com/?\u202eexe.lmth" would read as another address. Only what a request sends is checked
// (nil is not sent), so an endpoint stored before the rule can still be changed otherwise.
func checkHidden(url, description *string) error {
	if url != nil {
		if err := hiddenchar.Name(fmt.Errorf("%w: url", ErrInvalid), *url); err != nil {
			return err
		}
	}
	if description != nil {
		if err := hiddenchar.Name(fmt.Errorf("%w: description", ErrInvalid), *description); err != nil {
			return err
		}
	}
	return nil
}

func validate(sp *Spec) error {
	u, err := egress.ValidateURL(sp.URL)
	if err != nil {
		return fmt.Errorf("%w: url: %s", ErrInvalid, strings.TrimPrefix(err.Error(), egress.ErrRefused.Error()+": "))
	}
	sp.URL = u.String()
	if len(sp.Description) > MaxDescription {
		return fmt.Errorf("%w: description longer than %d bytes", ErrInvalid, MaxDescription)
	}
	seen := map[string]bool{}
	var events []string
	for _, e := range sp.Events {
		if !KnownEventType(e) {
			return fmt.Errorf("%w: unknown event type %q (known: %s)", ErrInvalid, e, strings.Join(EventTypes(), ", "))
		}
		if !seen[e] {
			seen[e] = true
			events = append(events, e)
		}
	}
	sp.Events = events
	return nil
}

// Create makes an enabled endpoint with a fresh secret. ErrLimit when the organization has MaxEndpoints.
func (s Endpoints) Create(ctx context.Context, orgID string, sp Spec) (Endpoint, error) {
	if err := checkHidden(&sp.URL, &sp.Description); err != nil {
		return Endpoint{}, err
	}
	if err := validate(&sp); err != nil {
		return Endpoint{}, err
	}
	secret, err := whsign.NewSecret()
	if err != nil {
		return Endpoint{}, err
	}
	now := s.Clock.Now()
	ep := Endpoint{ID: NewEndpointID(), URL: sp.URL, Description: sp.Description, Events: sp.Events, Enabled: true,
		Secret: secret, CreatedAt: now, UpdatedAt: now}
	_, err = s.update(ctx, orgID, func(rec *OrgEndpoints) error {
		if len(rec.Endpoints) >= MaxEndpoints {
			return ErrLimit
		}
		rec.Endpoints = append(rec.Endpoints, ep)
		return nil
	})
	return ep, err
}

// List returns the organization's endpoints, oldest first.
func (s Endpoints) List(ctx context.Context, orgID string) ([]Endpoint, error) {
	rec, _, err := s.load(ctx, orgID)
	if err != nil {
		return nil, err
	}
	return rec.Endpoints, nil
}

// Get returns one endpoint of the organization, or ErrNotFound.
func (s Endpoints) Get(ctx context.Context, orgID, id string) (Endpoint, error) {
	rec, _, err := s.load(ctx, orgID)
	if err != nil {
		return Endpoint{}, err
	}
	i := rec.find(id)
	if i < 0 {
		return Endpoint{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return rec.Endpoints[i], nil
}

// Usable returns the endpoint when it exists and is enabled: ErrNotFound or ErrDisabled otherwise (the API
// answers both with 404: a request naming it creates nothing).
func (s Endpoints) Usable(ctx context.Context, orgID, id string) (Endpoint, error) {
	if !ValidID(id) {
		return Endpoint{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	ep, err := s.Get(ctx, orgID, id)
	if err != nil {
		return Endpoint{}, err
	}
	if !ep.Enabled {
		return Endpoint{}, fmt.Errorf("%w: %s", ErrDisabled, id)
	}
	return ep, nil
}

// Patch lists the fields an update changes; nil leaves a field as it is.
type Patch struct {
	URL         *string
	Description *string
	Events      *[]string
	Enabled     *bool
}

// Update changes an endpoint.
func (s Endpoints) Update(ctx context.Context, orgID, id string, p Patch) (Endpoint, error) {
	if err := checkHidden(p.URL, p.Description); err != nil {
		return Endpoint{}, err
	}
	var out Endpoint
	_, err := s.update(ctx, orgID, func(rec *OrgEndpoints) error {
		i := rec.find(id)
		if i < 0 {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		ep := rec.Endpoints[i]
		sp := Spec{URL: ep.URL, Description: ep.Description, Events: ep.Events}
		if p.URL != nil {
			sp.URL = *p.URL
		}
		if p.Description != nil {
			sp.Description = *p.Description
		}
		if p.Events != nil {
			sp.Events = *p.Events
		}
		if err := validate(&sp); err != nil {
			return err
		}
		ep.URL, ep.Description, ep.Events = sp.URL, sp.Description, sp.Events
		if p.Enabled != nil {
			ep.Enabled = *p.Enabled
		}
		ep.UpdatedAt = s.Clock.Now()
		rec.Endpoints[i] = ep
		out = ep
		return nil
	})
	return out, err
}

// Rotate gives the endpoint a new secret; the old one keeps signing beside it for RotationOverlap. Rotating
// again within an overlap drops the oldest secret (only one previous secret is kept).
func (s Endpoints) Rotate(ctx context.Context, orgID, id string) (Endpoint, error) {
	secret, err := whsign.NewSecret()
	if err != nil {
		return Endpoint{}, err
	}
	var out Endpoint
	_, err = s.update(ctx, orgID, func(rec *OrgEndpoints) error {
		i := rec.find(id)
		if i < 0 {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		now := s.Clock.Now()
		ep := rec.Endpoints[i]
		ep.PreviousSecret, ep.PreviousUntil = ep.Secret, now.Add(RotationOverlap)
		ep.Secret, ep.RotatedAt, ep.UpdatedAt = secret, now, now
		rec.Endpoints[i] = ep
		out = ep
		return nil
	})
	return out, err
}

// Delete removes an endpoint; ErrNotFound when there is none. Its pending deliveries end at their next attempt
// (the handler finds no endpoint).
func (s Endpoints) Delete(ctx context.Context, orgID, id string) error {
	_, err := s.update(ctx, orgID, func(rec *OrgEndpoints) error {
		i := rec.find(id)
		if i < 0 {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		rec.Endpoints = slices.Delete(rec.Endpoints, i, i+1)
		return nil
	})
	return err
}
