package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"filigrane/internal/hiddenchar"
	"filigrane/persistence"
)

// Handler delivers the effects of one Kind.
type Handler struct {
	// Deliver performs the effect; attempt counts from 1 across redeliveries. nil: delivered. An error wrapped
	// with Permanent stops retrying (the entry goes dead); any other error is retried after the next wait of
	// Schedule. Deliver must be idempotent by Effect.ID: delivery is at least once.
	Deliver func(ctx context.Context, e Effect, attempt int) error
	// Schedule is the waits between attempts: the first attempt is made as soon as the effect is due, the
	// second Schedule[0] after the first failed, and so on; a failure after the last wait makes it dead.
	// Empty: DefaultSchedule.
	Schedule []time.Duration
	// Timeout bounds one Deliver call; 0 means 30 s.
	Timeout time.Duration
}

// DefaultSchedule is the retry schedule of a handler that names none, and of effects whose kind has no
// handler on this node (they go dead after it unless a node that knows the kind delivers them first).
var DefaultSchedule = []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 8 * time.Hour}

// Registry maps kinds to handlers. One is built per node (internal/node) and shared by everything that
// registers a kind; it is safe for concurrent use.
type Registry struct {
	mu       sync.RWMutex
	handlers map[string]Handler
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{handlers: map[string]Handler{}} }

// Register adds the handler of kind; a kind may be registered once.
func (r *Registry) Register(kind string, h Handler) error {
	if !validName(kind, false) || h.Deliver == nil {
		return fmt.Errorf("outbox: register %q: invalid kind or nil Deliver", kind)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.handlers[kind]; ok {
		return fmt.Errorf("outbox: kind %q registered twice", kind)
	}
	r.handlers[kind] = h
	return nil
}

// MustRegister is Register for start-up code, where a duplicate is a programming error.
func (r *Registry) MustRegister(kind string, h Handler) {
	if err := r.Register(kind, h); err != nil {
		panic(err)
	}
}

// Lookup returns the handler of kind.
func (r *Registry) Lookup(kind string) (Handler, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.handlers[kind]
	return h, ok
}

type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

// Permanent marks a delivery error that no retry can cure (the endpoint was deleted, the payload is refused):
// the entry goes dead at once.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err was wrapped with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

type noteKey struct{}

// Note records handler-specific detail for the current attempt's log entry (for example "HTTP 503"); the
// last note of an attempt wins. It does nothing outside a Deliver call.
func Note(ctx context.Context, detail string) {
	if p, ok := ctx.Value(noteKey{}).(*string); ok {
		*p = hiddenchar.Remote(detail, hiddenchar.RemoteLimit)
	}
}

// Deliverer is the outbox pass: the leased sweeper runs it.
type Deliverer struct {
	Outbox   Outbox
	Registry *Registry
	Logger   zerolog.Logger
	// Limit bounds the due entries one pass looks at; 0 means 1000. The rest waits for the next pass.
	Limit int
}

// PassResult counts what a pass did.
type PassResult struct {
	Delivered, Failed, Dead, Deleted int
}

// Pass looks at every entry due at the clock's now, in due order: it attempts pending ones (recording the
// attempt and the next due time or the end) and deletes delivered and dead ones past their retention. A
// failure of one entry is logged and left for the next pass; only storage trouble with the scan itself ends
// the pass early with an error.
func (d Deliverer) Pass(ctx context.Context) (PassResult, error) {
	var res PassResult
	limit := d.Limit
	if limit <= 0 {
		limit = 1000
	}
	now := d.Outbox.Clock.Now()
	end := string(dueKey(now.Add(time.Nanosecond), "")) // due keys sort by time: those before end are due
	items, err := d.Outbox.Store.Scan(ctx, []byte(prefixDue), nil, limit)
	if err != nil {
		return res, fmt.Errorf("outbox: scan due entries: %w", err)
	}
	blocked := map[string]bool{} // kind/key whose earlier effect failed in this pass
	for _, it := range items {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if string(it.Key) >= end {
			break
		}
		rest := strings.TrimPrefix(string(it.Key), prefixDue)
		_, id, ok := strings.Cut(rest, "/")
		if !ok {
			d.drop(ctx, it)
			continue
		}
		if err := d.one(ctx, it, id, now, blocked, &res); err != nil {
			d.Logger.Warn().Err(err).Str("effect", id).Msg("outbox: left for the next pass")
		}
	}
	return res, nil
}

func (d Deliverer) drop(ctx context.Context, it persistence.Item) {
	if err := d.Outbox.Store.Delete(ctx, it.Key, it.Version); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
		d.Logger.Warn().Err(err).Str("key", string(it.Key)).Msg("outbox: drop index key")
	}
}

// one handles the due key it of effect id.
func (d Deliverer) one(ctx context.Context, it persistence.Item, id string, now time.Time, blocked map[string]bool, res *PassResult) error {
	ent, ver, err := d.Outbox.get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		d.drop(ctx, it) // deleted after its retention, or a key written by a hand-over that did not finish
		return nil
	}
	if err != nil {
		return err
	}
	if string(dueKey(ent.NextAt, id)) != string(it.Key) {
		d.drop(ctx, it) // stale: the entry was rescheduled (a redelivery, a pass that lost a race)
		return nil
	}
	if ent.Status != StatusPending {
		// Past its retention: the index key, the entry, then this due key.
		if ent.Effect.Key != "" {
			if err := d.deleteKeyIndex(ctx, ent.Effect); err != nil {
				return err
			}
		}
		if err := d.Outbox.Store.Delete(ctx, fxKey(id), ver); err != nil {
			if errors.Is(err, persistence.ErrVersionMismatch) {
				return nil // redelivered meanwhile
			}
			return fmt.Errorf("delete %s: %w", id, err)
		}
		d.drop(ctx, it)
		res.Deleted++
		return nil
	}
	order := ent.Effect.Kind + "/" + ent.Effect.Key
	if ent.Effect.Key != "" && blocked[order] {
		return nil // an earlier effect of this key failed in this pass: keep the order
	}
	h, known := d.Registry.Lookup(ent.Effect.Kind)
	schedule := h.Schedule
	if !known || len(schedule) == 0 {
		schedule = DefaultSchedule
	}
	att := Attempt{N: ent.Total + 1, At: now}
	if known {
		timeout := h.Timeout
		if timeout <= 0 {
			timeout = 30 * time.Second
		}
		var detail string
		dctx, cancel := context.WithTimeout(context.WithValue(ctx, noteKey{}, &detail), timeout)
		started := time.Now()
		derr := callDeliver(dctx, h, ent.Effect, att.N)
		att.Duration = time.Since(started)
		cancel()
		att.Detail = detail
		if derr != nil {
			// A handler's error may quote what a remote server chose (a webhook receiver's certificate
			// names, an S3 endpoint's message): it is stored escaped and bounded, for every reader.
			att.Error, att.Permanent = hiddenchar.Remote(derr.Error(), hiddenchar.RemoteLimit), IsPermanent(derr)
		}
		if ctx.Err() != nil && derr != nil {
			return ctx.Err() // the pass was stopped (lease lost, shutdown): this attempt does not count
		}
	} else {
		att.Error = "no handler for kind " + ent.Effect.Kind + " on this node"
	}
	next := *ent
	next.Attempts = append(append([]Attempt(nil), ent.Attempts...), att)
	if len(next.Attempts) > maxAttemptLog {
		next.Attempts = next.Attempts[len(next.Attempts)-maxAttemptLog:]
	}
	next.Total++
	next.Round++
	switch {
	case att.Error == "":
		next.Status, next.NextAt, next.EndedAt = StatusDelivered, now.Add(d.Outbox.retention()), &now
		res.Delivered++
	case att.Permanent || next.Round > len(schedule):
		next.Status, next.NextAt, next.EndedAt = StatusDead, now.Add(d.Outbox.retention()), &now
		res.Dead++
	default:
		next.NextAt = now.Add(schedule[next.Round-1])
		res.Failed++
	}
	if att.Error != "" && ent.Effect.Key != "" {
		blocked[order] = true
	}
	// The attempt happened: record it even when the pass is being stopped (shutdown, lost lease), so that a
	// delivered effect is not delivered again for want of its record.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// The new due key before the entry names it; the old one goes after.
	if err := d.Outbox.create(ctx, dueKey(next.NextAt, id)); err != nil {
		return err
	}
	b, err := persistence.Marshal(&next)
	if err != nil {
		return fmt.Errorf("encode %s: %w", id, err)
	}
	if _, err := d.Outbox.Store.CompareAndSet(ctx, fxKey(id), ver, b); err != nil {
		// Another pass or a redelivery wrote it: the attempt stays unlogged, the effect was still delivered
		// at least once (or will be tried again from that writer's state).
		return fmt.Errorf("record attempt of %s: %w", id, err)
	}
	d.drop(ctx, it)
	return nil
}

func (d Deliverer) deleteKeyIndex(ctx context.Context, e Effect) error {
	it, err := d.Outbox.Store.Get(ctx, keyIndex(e))
	if errors.Is(err, persistence.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete index of %s: %w", e.ID, err)
	}
	if err := d.Outbox.Store.Delete(ctx, it.Key, it.Version); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
		return fmt.Errorf("delete index of %s: %w", e.ID, err)
	}
	return nil
}

// callDeliver runs the handler, turning a panic into a failed attempt: one bad effect must not end the pass.
func callDeliver(ctx context.Context, h Handler, e Effect, attempt int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return h.Deliver(ctx, e, attempt)
}
