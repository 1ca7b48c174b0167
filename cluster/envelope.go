package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/vmihailenco/msgpack/v5"
	"google.golang.org/protobuf/types/known/anypb"
)

// TypeURLPrefix starts the TypeUrl of every msgpack envelope.
const TypeURLPrefix = "msgpack/"

// failureTypeName is the wire name of Failure; it is registered in every
// Registry so that any node can decode an error reply.
const failureTypeName = "cluster.Failure"

// Envelope errors. They are wrapped with the type name or URL involved.
var (
	// ErrUnknownType: the envelope names a type that is not registered here.
	ErrUnknownType = errors.New("unknown message type")
	// ErrNotRegistered: Wrap was given a value whose type is not registered.
	ErrNotRegistered = errors.New("message type not registered")
	// ErrBadEnvelope: the envelope is nil, is not a msgpack envelope, or its
	// bytes do not decode into the registered type.
	ErrBadEnvelope = errors.New("bad envelope")
	// ErrNoSender: Respond was called while handling a message that nobody
	// waits for (a Send, not a Request).
	ErrNoSender = errors.New("no sender to respond to")
)

// Failure is an error reply. An actor sends it with RespondFailure; callers
// of Node.Request and Registry.RequestPID receive it as the returned error.
// Code is a short machine-readable word chosen by the actor; Message is for
// humans and logs.
type Failure struct {
	Code    string `msgpack:"code"`
	Message string `msgpack:"msg"`
}

// Error implements error.
func (f *Failure) Error() string {
	if f.Code == "" {
		return "remote failure: " + f.Message
	}
	return "remote failure (" + f.Code + "): " + f.Message
}

// Failure codes used by this package's middleware.
const (
	FailureUnknownType = "unknown_message_type"
	FailureBadEnvelope = "bad_envelope"
)

// Registry maps wire names to Go types for msgpack envelopes. The zero value
// is not usable; create one with NewRegistry. It is safe for concurrent use,
// but all types should be registered before messages flow: a node that
// receives a type it has not registered answers with a Failure.
type Registry struct {
	mu     sync.RWMutex
	byName map[string]reflect.Type
	byType map[reflect.Type]string
	copier localCopier // plans for replies to callers on this node (localcopy.go)
}

// NewRegistry returns a Registry that already knows Failure.
func NewRegistry() *Registry {
	r := &Registry{
		byName: make(map[string]reflect.Type),
		byType: make(map[reflect.Type]string),
	}
	if err := r.RegisterName(failureTypeName, Failure{}); err != nil {
		panic(err) // cannot happen on an empty registry
	}
	return r
}

// Register registers the type of v (a value or a pointer to one) under its
// default name "<last element of package path>.<TypeName>", for example
// "actors.Reserve". Registering the same type twice under the same name is a
// no-op; a name clash between two types is an error (use RegisterName).
func (r *Registry) Register(v any) error {
	t, err := namedType(v)
	if err != nil {
		return err
	}
	return r.registerType(defaultName(t), t)
}

// RegisterName registers the type of v under an explicit wire name. Use it
// when two packages have types with the same default name, or to keep the
// wire name stable when a type moves to another package.
func (r *Registry) RegisterName(name string, v any) error {
	t, err := namedType(v)
	if err != nil {
		return err
	}
	if name == "" || strings.ContainsAny(name, " /") {
		return fmt.Errorf("cluster: register %v: invalid wire name %q", t, name)
	}
	return r.registerType(name, t)
}

// MustRegister registers each value's type under its default name and panics
// on the first error. It is meant for process start-up code.
func (r *Registry) MustRegister(vs ...any) {
	for _, v := range vs {
		if err := r.Register(v); err != nil {
			panic(err)
		}
	}
}

// Register registers T under its default name; see Registry.Register.
func Register[T any](r *Registry) error {
	var zero T
	return r.Register(zero)
}

func (r *Registry) registerType(name string, t reflect.Type) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.byName[name]; ok {
		if old == t {
			return nil
		}
		return fmt.Errorf("cluster: register %v: name %q already used by %v", t, name, old)
	}
	if old, ok := r.byType[t]; ok {
		return fmt.Errorf("cluster: register %v as %q: already registered as %q", t, name, old)
	}
	r.byName[name] = t
	r.byType[t] = name
	return nil
}

// namedType returns the non-pointer named type of v.
func namedType(v any) (reflect.Type, error) {
	t := reflect.TypeOf(v)
	if t == nil {
		return nil, errors.New("cluster: register: nil value has no type")
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() == "" || t.PkgPath() == "" {
		return nil, fmt.Errorf("cluster: register %v: only named types declared in a package can be registered", t)
	}
	if t.Kind() == reflect.Interface || t.Kind() == reflect.Func || t.Kind() == reflect.Chan {
		return nil, fmt.Errorf("cluster: register %v: %v types cannot be encoded", t, t.Kind())
	}
	return t, nil
}

func defaultName(t reflect.Type) string {
	return path.Base(t.PkgPath()) + "." + t.Name()
}

// Name returns the wire name under which v's type is registered.
func (r *Registry) Name(v any) (string, bool) {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	name, ok := r.byType[t]
	return name, ok
}

// Wrap encodes v (a registered type or a pointer to one) into an envelope.
func (r *Registry) Wrap(v any) (*anypb.Any, error) {
	rv := reflect.ValueOf(v)
	for rv.IsValid() && rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil, fmt.Errorf("cluster: wrap %T: nil pointer", v)
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return nil, errors.New("cluster: wrap: nil value")
	}
	r.mu.RLock()
	name, ok := r.byType[rv.Type()]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("cluster: wrap %v: %w", rv.Type(), ErrNotRegistered)
	}
	b, err := msgpack.Marshal(rv.Interface())
	if err != nil {
		return nil, fmt.Errorf("cluster: wrap %s: encode: %w", name, err)
	}
	return &anypb.Any{TypeUrl: TypeURLPrefix + name, Value: b}, nil
}

// IsEnvelope reports whether m is a msgpack envelope (whatever its type).
func IsEnvelope(m any) bool {
	a, ok := m.(*anypb.Any)
	return ok && a != nil && strings.HasPrefix(a.TypeUrl, TypeURLPrefix)
}

// Unwrap decodes an envelope into a new value of the registered type and
// returns a pointer to it. Unknown names wrap ErrUnknownType; anything that is
// not a well-formed msgpack encoding of exactly one value wraps ErrBadEnvelope.
func (r *Registry) Unwrap(a *anypb.Any) (any, error) {
	if a == nil {
		return nil, fmt.Errorf("cluster: unwrap: nil envelope: %w", ErrBadEnvelope)
	}
	name, ok := strings.CutPrefix(a.TypeUrl, TypeURLPrefix)
	if !ok {
		return nil, fmt.Errorf("cluster: unwrap: type URL %q is not a msgpack envelope: %w", a.TypeUrl, ErrBadEnvelope)
	}
	r.mu.RLock()
	t, ok := r.byName[name]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("cluster: unwrap %q: %w", a.TypeUrl, ErrUnknownType)
	}
	if len(a.Value) == 0 || a.Value[0] == msgpackNil {
		// Wrap never produces these: nil would silently decode to a zero value.
		return nil, fmt.Errorf("cluster: unwrap %s: empty or nil payload: %w", name, ErrBadEnvelope)
	}
	ptr := reflect.New(t)
	rd := bytes.NewReader(a.Value)
	dec := msgpack.NewDecoder(rd)
	if err := dec.Decode(ptr.Interface()); err != nil {
		return nil, fmt.Errorf("cluster: unwrap %s: decode %d bytes: %v: %w", name, len(a.Value), err, ErrBadEnvelope)
	}
	if rd.Len() != 0 {
		return nil, fmt.Errorf("cluster: unwrap %s: %d trailing bytes after the value: %w", name, rd.Len(), ErrBadEnvelope)
	}
	return ptr.Interface(), nil
}

const msgpackNil = 0xc0

// ReceiverMiddleware unwraps incoming envelopes so the actor receives a
// pointer to the registered Go type. An envelope that cannot be decoded never
// reaches the actor: it is logged and, when someone waits for a reply,
// answered with a Failure so the caller fails at once instead of timing out.
func (r *Registry) ReceiverMiddleware() actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			a, ok := env.Message.(*anypb.Any)
			if !ok || !IsEnvelope(a) {
				next(c, env)
				return
			}
			v, err := r.Unwrap(a)
			if err != nil {
				code := FailureBadEnvelope
				if errors.Is(err, ErrUnknownType) {
					code = FailureUnknownType
				}
				c.Logger().Warn("dropping undecodable actor message",
					slog.String("actor", c.Self().String()), slog.String("type_url", a.TypeUrl), slog.Any("error", err))
				if env.Sender != nil {
					if reply, werr := r.Wrap(&Failure{Code: code, Message: err.Error()}); werr == nil {
						c.ActorSystem().Root.Send(env.Sender, reply)
					}
				}
				return
			}
			next(c, &actor.MessageEnvelope{Header: env.Header, Message: v, Sender: env.Sender})
		}
	}
}

// WithEnvelope returns a copy of props whose actors receive unwrapped values.
// Start applies it to every kind; use it for plain (non-grain) actors that are
// reached remotely by PID.
func (r *Registry) WithEnvelope(props *actor.Props) *actor.Props {
	return props.Clone(actor.WithReceiverMiddleware(r.ReceiverMiddleware()))
}

// Respond wraps v and sends it to the sender of the message being handled. A sender on this node gets a
// deep copy instead of an envelope when v's type allows one (LocalCopy): the same value, without the cost
// of encoding and decoding it.
func Respond(ctx actor.Context, reg *Registry, v any) error {
	sender := ctx.Sender()
	if sender == nil {
		return fmt.Errorf("cluster: respond %T: %w", v, ErrNoSender)
	}
	if sender.Address == ctx.ActorSystem().Address() {
		if c, ok := reg.LocalCopy(v); ok {
			ctx.Respond(c)
			return nil
		}
	}
	a, err := reg.Wrap(v)
	if err != nil {
		return fmt.Errorf("cluster: respond: %w", err)
	}
	ctx.Respond(a)
	return nil
}

// RespondFailure answers the message being handled with a Failure, which the
// caller receives as an error.
func RespondFailure(ctx actor.Context, reg *Registry, code string, err error) error {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	return Respond(ctx, reg, &Failure{Code: code, Message: msg})
}

// DefaultRequestTimeout bounds a request whose context has no deadline (and
// Config.RequestTimeout is not set).
const DefaultRequestTimeout = 5 * time.Second

// requestTimeout is the time left before ctx's deadline or, when ctx has
// none, def (DefaultRequestTimeout when def is zero). A request never waits
// without a bound: a lost reply would otherwise hold the caller forever.
func requestTimeout(ctx context.Context, def time.Duration) (time.Duration, error) {
	if def <= 0 {
		def = DefaultRequestTimeout
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 {
			return 0, context.DeadlineExceeded
		}
		return left, nil
	}
	return def, nil
}

// DecodeReply turns a raw reply (for example the result of an actor's own
// ctx.RequestFuture) into the caller's value: envelopes are unwrapped, a
// Failure becomes the returned error, other values (protobuf replies, local
// plain values) are returned as they are.
func (r *Registry) DecodeReply(resp any) (any, error) {
	if a, ok := resp.(*anypb.Any); ok && IsEnvelope(a) {
		v, err := r.Unwrap(a)
		if err != nil {
			return nil, fmt.Errorf("reply: %w", err)
		}
		resp = v
	}
	if f, ok := resp.(*Failure); ok {
		return nil, f
	}
	return resp, nil
}

// RequestPID sends msg (wrapped) to a plain actor by PID and waits for its
// reply, at most until ctx's deadline or DefaultRequestTimeout. It is the
// remote-only counterpart of Node.Request, for named actors whose PID is
// known (for example a per-node GPU actor found through member metadata).
// The reply is unwrapped; a Failure reply is returned as the error.
func (r *Registry) RequestPID(ctx context.Context, sender actor.SenderContext, pid *actor.PID, msg any) (any, error) {
	timeout, err := requestTimeout(ctx, 0)
	if err != nil {
		return nil, fmt.Errorf("cluster: request %s: %w", pid, err)
	}
	a, err := r.Wrap(msg)
	if err != nil {
		return nil, fmt.Errorf("cluster: request %s: %w", pid, err)
	}
	f := sender.RequestFuture(pid, a, timeout)
	done := make(chan struct{})
	var resp any
	var rerr error
	go func() {
		resp, rerr = f.Result()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		// The future still times out on its own; the message may already
		// have been delivered, which is why commands are idempotent.
		return nil, fmt.Errorf("cluster: request %s: %w", pid, ctx.Err())
	}
	if rerr != nil {
		return nil, fmt.Errorf("cluster: request %s: %w", pid, rerr)
	}
	v, err := r.DecodeReply(resp)
	if err != nil {
		return nil, fmt.Errorf("cluster: request %s: %w", pid, err)
	}
	return v, nil
}
