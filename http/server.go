// Package http is Filigrane's fasthttp edge: routing, authentication, request limits, problem responses and
// metrics. It decides no job state: it checks a request, then hands it to the actors.
package http

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/actors/outbox"
	"filigrane/actors/storagedest"
	"filigrane/actors/webhooks"
	"filigrane/http/console"
	"filigrane/internal/authlimit"
	"filigrane/internal/clientaddr"
	"filigrane/internal/clock"
	"filigrane/internal/netguard"
	"filigrane/internal/problem"
	"filigrane/internal/reqlog"
	"filigrane/persistence"
)

const (
	headerRequestID = "X-Request-ID"
	headerAPIKey    = "X-API-Key"
)

// Config is what the API server needs.
type Config struct {
	Keys  actors.Keys
	Orgs  actors.OrgClient
	Store persistence.Store
	Blobs persistence.Blobs
	// Caller reaches the job actors.
	Caller actors.Caller
	// PutHolder (upload host) names this node's cluster member on the leases its PUTs take, and says which
	// members are gone: another node's PUT whose member is gone does not hold the upload (zero: leases run
	// to their end).
	PutHolder actors.PutHolder
	// Media runs synchronous detection; Pool bounds it by the node's CPU tokens.
	Media   actors.Media
	Pool    *actors.Pool
	Catalog actors.Catalog
	Clock   clock.Clock
	Logger  zerolog.Logger
	Metrics *Metrics
	// Outbox holds webhook and storage deliveries (delivery logs, redelivery and retry read it).
	Outbox outbox.Outbox
	// MaxHeaderBytes bounds the request line plus headers (431 above it). Default 16 KiB.
	MaxHeaderBytes int
	// MaxBodyBytes bounds any request body (413 above it, before routing). Default 56 MiB: the largest direct
	// request (a 55 MB batch zip) plus its form. Routes enforce their own, smaller limits while streaming.
	MaxBodyBytes int
	// PublicURL is the base URL clients reach the API at behind a proxy (ParsePublicURL's form, no trailing
	// slash), e.g. https://api.example.com/filigrane: Location headers are absolute under it. Empty: Location
	// is the resource's path.
	PublicURL string
	// MaxDirectEmbed, when above 0, lowers the largest file an embed request carries itself below the media-kind
	// table's (40 MB for images, our extension for Etchv's SDKs): 20_000_000 holds to the spec's 20 MB.
	MaxDirectEmbed int64
	// ActorTimeout bounds each call to an actor made while serving a request. Default 10 s.
	ActorTimeout time.Duration
	// GPU is the node's accelerator state (a gpu.Fleet); nil means none.
	GPU GPUState
	// Wakeups holds wake-up calls with a webhook made while the GPU was starting (accelerator.ready is sent
	// when it becomes ready); nil: such calls get no event.
	Wakeups *webhooks.Wakeups
	// GPUStrict answers accelerator=gpu with 503 gpu_unavailable and Retry-After when no GPU is ready,
	// instead of running the work on the CPU at the normal charge (the default, which Etchv's SDKs expect).
	GPUStrict bool
	// Health, when set, adds node facts (name, cluster members) to GET /healthz.
	Health func() map[string]any
	// Ready, when set, runs the checks of GET /readyz (storage reachable, cluster membership); ctx carries
	// the probe's deadline.
	Ready func(ctx context.Context) []ReadyCheck
	// SyncWait is how long a synchronous embed waits before answering 202 with the receipt. Default 20 s
	// (spec 8).
	SyncWait time.Duration
	// Conns bounds the listener's connections and how long they may stall (see ConnLimits).
	Conns ConnLimits
	// TLS, when set, makes Serve answer HTTPS: TLS runs inside the connection guard (limits and deadlines
	// apply to the encrypted connection; the handshake is bounded by the header timeout).
	TLS *tls.Config
	// Storage is the organizations' storage destinations; nil: the storage routes are absent and every
	// storage_destination_id is refused.
	Storage *storagedest.Library
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names the client address that the
	// per-address limits count against (unknown API keys, the console's sign-ins and session cookies); zero:
	// the connection's address, so all clients behind an unlisted proxy share one budget.
	TrustedProxies clientaddr.Proxies
}

// ConnLimits bound what one client can hold on a listener. Zero values take the defaults.
type ConnLimits struct {
	// MaxConns caps open connections per listener (default 4096); MaxConnsPerIP caps them per client
	// address (default 256). A connection over either is answered 503 and closed at once.
	MaxConns      int
	MaxConnsPerIP int
	// HeaderTimeout bounds the time from a request's first byte (or a new connection) to its complete
	// headers. Default 10 s.
	HeaderTimeout time.Duration
	// BodyProgress bounds the wait for the next bytes of a request body or a response once the headers are
	// in: a 190 MB upload over a slow link lives as long as it moves. Default 60 s.
	BodyProgress time.Duration
	// IdleTimeout bounds a keep-alive connection's wait for its next request. Default 60 s.
	IdleTimeout time.Duration
}

// Defaults of ConnLimits.
const (
	DefaultHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout   = 60 * time.Second
)

func (l *ConnLimits) defaults() {
	if l.MaxConns <= 0 {
		l.MaxConns = netguard.DefaultMaxConns
	}
	if l.MaxConnsPerIP <= 0 {
		l.MaxConnsPerIP = netguard.DefaultMaxConnsPerIP
	}
	if l.HeaderTimeout <= 0 {
		l.HeaderTimeout = DefaultHeaderTimeout
	}
	if l.BodyProgress <= 0 {
		l.BodyProgress = netguard.DefaultBodyProgress
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
}

// newFastServer is the fasthttp server of both listeners. Its ReadTimeout is the header timeout: Serve wraps
// the listener so that, once a handler runs, reads and writes are bounded by progress instead (fasthttp's
// own timeouts measure total time, which would cut a large upload over a slow link).
func newFastServer(s *Server, name string) *fasthttp.Server {
	l := s.cfg.Conns
	return &fasthttp.Server{
		Handler:        s.serve,
		ErrorHandler:   s.serveParseError,
		Name:           name,
		ReadBufferSize: s.cfg.MaxHeaderBytes,
		// Bodies are streamed to handlers (multipart files and PUT bodies go straight to the blob store);
		// only this much is read ahead. Multipart pre-parsing would spool files to temporary files behind
		// our back.
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
		MaxRequestBodySize:           streamAhead,
		ReadTimeout:                  l.HeaderTimeout,
		// Once the headers are in, the body's first bytes (read ahead before the handler runs) get a fresh
		// window of BodyProgress instead of what is left of the header timeout.
		HeaderReceived: func(*fasthttp.RequestHeader) fasthttp.RequestConfig {
			return fasthttp.RequestConfig{ReadTimeout: l.BodyProgress}
		},
		WriteTimeout: l.BodyProgress,
		IdleTimeout:  l.IdleTimeout,
		// The listener refuses connections over MaxConns before fasthttp sees them; this is a backstop.
		Concurrency:          l.MaxConns + 1,
		NoDefaultContentType: true,
		CloseOnShutdown:      true,
		Logger:               fasthttpLogger{s.cfg.Logger},
	}
}

// Server is the API listener.
type Server struct {
	cfg    Config
	router router
	srv    *fasthttp.Server
	life   lifetime

	// mu guards what Shutdown must close even when a Serve has not reached fasthttp yet: fasthttp's
	// Shutdown does nothing to a listener it has not seen, which would then be served forever.
	mu        sync.Mutex
	shutDown  bool
	listeners []net.Listener
	// guards are the listeners' guards, whose lingering closes Shutdown cuts short and joins.
	guards []*netguard.Listener
	// console is the web console under /console; nil until MountConsole.
	console *console.Console
}

// New builds the API server and its routes.
func New(cfg Config) *Server {
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = 16 << 10
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 56 << 20
	}
	if cfg.ActorTimeout <= 0 {
		cfg.ActorTimeout = 10 * time.Second
	}
	if cfg.SyncWait <= 0 {
		cfg.SyncWait = 20 * time.Second
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	s := &Server{cfg: cfg, life: newLifetime()}
	s.routes()
	s.cfg.Conns.defaults()
	s.srv = newFastServer(s, "filigrane")
	return s
}

// streamAhead is how much of a request body fasthttp reads before the handler runs; larger bodies stream.
const streamAhead = 64 << 10

func (s *Server) routes() {
	s.router.handle("GET", "/auth/api-key", s.authed(nil, s.getAPIKey))
	s.mediaRoutes()
	s.uploadRoutes()
	s.assetRoutes()
	s.gpuRoutes()
	s.webhookRoutes()
	s.storageRoutes()
	s.storageDeliveryRoutes()
	s.contractRoutes()
	s.router.handle("GET", "/metrics", func(ctx *fasthttp.RequestCtx, _ map[string]string) { s.cfg.Metrics.serve(ctx) })
	s.router.handle("GET", "/healthz", func(ctx *fasthttp.RequestCtx, _ map[string]string) {
		body := map[string]any{}
		if s.cfg.Health != nil {
			body = s.cfg.Health()
		}
		body["status"] = "ok"
		writeJSON(ctx, 200, body)
	})
	s.router.handle("GET", "/readyz", s.readyz)
}

// Serve answers requests on ln until Shutdown. ln is guarded by the connection limits; temporary accept
// errors (out of file descriptors) are waited out, never returned.
func (s *Server) Serve(ln net.Listener) error {
	l := s.cfg.Conns
	g := netguard.Wrap(ln, netguard.Limits{MaxConns: l.MaxConns, MaxConnsPerIP: l.MaxConnsPerIP, BodyProgress: l.BodyProgress,
		Refusal: s.connRefusal})
	var lastLog time.Time
	g.OnTemporary = func(err error, backoff time.Duration) {
		// One line a second at most: a descriptor flood must not become a log flood.
		if now := time.Now(); now.Sub(lastLog) >= time.Second {
			lastLog = now
			s.cfg.Logger.Warn().Err(err).Dur("backoff", backoff).Str("listener", ln.Addr().String()).
				Msg("accept failed; waiting and accepting again")
		}
	}
	name := "api"
	if s.srv.Name == "filigrane-upload" {
		name = "upload"
	}
	s.cfg.Metrics.watchListener(name, g)
	s.mu.Lock()
	if s.shutDown {
		s.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	var served net.Listener = g
	if s.cfg.TLS != nil {
		served = tls.NewListener(g, s.cfg.TLS)
	}
	once := &closeOnce{Listener: served}
	s.listeners = append(s.listeners, once)
	s.guards = append(s.guards, g)
	s.mu.Unlock()
	err := s.srv.Serve(once)
	if errors.Is(err, net.ErrClosed) && s.isShutDown() {
		return nil
	}
	return err
}

// closeOnce closes its listener once: Shutdown and fasthttp both close it, and a second Close of some
// listeners (fasthttputil's in-memory one) fails with an error that is not net.ErrClosed.
type closeOnce struct {
	net.Listener
	once sync.Once
	err  error
}

func (c *closeOnce) Close() error {
	c.once.Do(func() { c.err = c.Listener.Close() })
	return c.err
}

func (s *Server) isShutDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shutDown
}

// Shutdown stops accepting connections and waits for in-flight requests to finish or ctx to end. Then it
// cancels the context of every request still running (and of every blob still streaming), so that they stop
// their blocking calls instead of outliving the server.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutDown = true
	listeners, guards := s.listeners, s.guards
	s.mu.Unlock()
	for _, ln := range listeners {
		_ = ln.Close() // a Serve that had not reached fasthttp's accept loop stops at once
	}
	err := s.srv.ShutdownWithContext(ctx)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		// The grace ended with requests still running. fasthttp stops waiting for them and lets their
		// connections serve again (keep-alive, no Connection: close): a node past its grace went on answering
		// new requests on them while it left the cluster (bench chaos, SIGTERM with a 30 s synchronous
		// detection in flight: 480 requests in the 10 s after the grace). Close them now.
		for _, g := range guards {
			g.CloseOpen()
		}
	}
	s.life.end()
	for _, g := range guards {
		g.EndLingering()
		g.Wait()
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil // fasthttp closing a listener closed above
	}
	return err
}

// Handler returns the request handler, for in-memory tests.
func (s *Server) Handler() fasthttp.RequestHandler { return s.serve }

// connRefusal is what a connection over the connection limits reads before the listener closes it
// (netguard): 503 service_unavailable with Retry-After: 1, in the problem shape of every other answer and
// with its own request id, so that a client branching on the error table's codes, or a report quoting the
// id, sees this refusal like any other 503.
func (s *Server) connRefusal() []byte {
	id := newRequestID()
	entry, _ := problem.Lookup(CodeUnavailable)
	body, _ := encodeJSON(Problem{Type: problemTypeBase + string(CodeUnavailable), Title: entry.Title, Status: entry.Status,
		Detail: "too many open connections; retry shortly", Code: CodeUnavailable, RequestID: id})
	head := fmt.Sprintf("HTTP/1.1 %d %s\r\nServer: %s\r\nContent-Type: application/problem+json\r\nRetry-After: 1\r\n"+
		"%s: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n",
		entry.Status, fasthttp.StatusMessage(entry.Status), s.srv.Name, headerRequestID, id, len(body))
	return append([]byte(head), body...)
}

func newRequestID() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return "req_" + hex.EncodeToString(b)
}

// guardedConn finds the connection guard under c (under TLS, the encrypted connection's).
func guardedConn(c net.Conn) (*netguard.Conn, bool) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	gc, ok := c.(*netguard.Conn)
	return gc, ok
}

func (s *Server) serve(ctx *fasthttp.RequestCtx) {
	start := time.Now()
	// The headers are in: from here the body and the response are bounded by progress, not total time.
	if gc, ok := guardedConn(ctx.Conn()); ok {
		gc.BeginBody()
	}
	id := newRequestID()
	ctx.Response.Header.Set(headerRequestID, id)
	// Every line written while serving the request names its id, this access line among them (reqlog).
	log := reqlog.Begin(ctx, s.cfg.Logger, id).Logger()
	method := string(ctx.Method())
	label := "unmatched"
	rt, params, allowed := s.router.match(method, string(ctx.Path()))
	switch {
	case ctx.Request.Header.ContentLength() > s.cfg.MaxBodyBytes:
		ctx.SetConnectionClose()
		writeProblem(ctx, CodeTooLarge, fmt.Sprintf("the request body exceeds %d bytes; send larger files through an upload", s.cfg.MaxBodyBytes))
	case (rt != nil || s.console != nil && console.Handles(string(ctx.Path()))) && startsWork(method) && s.draining():
		if rt != nil {
			label = rt.pattern
		}
		refuseDraining(ctx)
	case s.console != nil && console.Handles(string(ctx.Path())):
		label = s.serveConsole(ctx)
	case rt != nil:
		label = rt.pattern
		rt.h(ctx, params)
	case len(allowed) > 0:
		ctx.Response.Header.Set("Allow", strings.Join(allowed, ", "))
		writeProblem(ctx, CodeMethodNotAllowed, fmt.Sprintf("%s is not allowed here; allowed: %s", method, strings.Join(allowed, ", ")))
	default:
		writeProblem(ctx, CodeNotFound, "no such route")
	}
	if s.draining() {
		// The listener closes soon: a client's next request should reach another node through the balancer.
		ctx.SetConnectionClose()
	}
	finishBody(ctx)
	status := ctx.Response.StatusCode()
	s.cfg.Metrics.observe(label, method, status, time.Since(start))
	ev := log.Debug()
	if status >= 500 {
		ev = log.Warn()
	}
	ev.Str("method", method).Str("route", label).Int("status", status).Dur("took", time.Since(start)).Msg("request")
}

// finishBody reads what the handler left of a streamed request body, so that the connection's next bytes are
// the next request's: a multipart reader stops at the closing boundary, and a chunked body's last chunk and
// trailer come after it (left unread, they were parsed as a request and answered 400). More than
// maxDrainAfterForm left, or a read error, closes the connection instead; so does an answer already marked
// to close (an early refusal does not read a large body).
func finishBody(ctx *fasthttp.RequestCtx) {
	if ctx.Response.ConnectionClose() {
		return
	}
	r := ctx.RequestBodyStream()
	if r == nil {
		return
	}
	n, err := io.Copy(io.Discard, io.LimitReader(r, maxDrainAfterForm+1))
	if err != nil || n > maxDrainAfterForm {
		ctx.SetConnectionClose()
	}
}

// serveParseError answers requests that fasthttp could not read (oversized headers or body, broken framing)
// with a problem body, so that clients see the same error shape everywhere.
func (s *Server) serveParseError(ctx *fasthttp.RequestCtx, err error) {
	ctx.Response.Header.Set(headerRequestID, newRequestID())
	var tooBig *fasthttp.ErrSmallBuffer
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		writeProblem(ctx, CodeTooLarge, fmt.Sprintf("the request body exceeds %d bytes", s.cfg.MaxBodyBytes))
	case isTimeout(err):
		writeProblem(ctx, CodeRequestTimeout, fmt.Sprintf("the request headers did not arrive within %s", s.cfg.Conns.HeaderTimeout))
	case errors.As(err, &tooBig) || strings.Contains(err.Error(), "small read buffer"):
		writeProblem(ctx, CodeHeadersTooLarge, fmt.Sprintf("the request headers exceed %d bytes", s.cfg.MaxHeaderBytes))
	default:
		writeProblem(ctx, CodeBadRequest, "the request could not be parsed")
	}
	ctx.SetConnectionClose()
	s.cfg.Metrics.observe("unparsed", "", ctx.Response.StatusCode(), 0)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// principal is the authenticated caller of a request.
type principal struct {
	Key  actors.APIKey
	Role actors.Role
	Plan actors.Plan
	// SlotsFull is the org actor's hint, at admission, that every concurrency slot was taken: a media
	// request answers 429 before reading its upload (earlyConcurrencyRefusal).
	SlotsFull bool
}

// authed wraps h with authentication (401), membership (403), the per-minute limit (429) and scopes (403):
// the key needs at least one of anyScope when it is not empty.
func (s *Server) authed(anyScope []string, h func(*fasthttp.RequestCtx, *principal, map[string]string)) handler {
	return func(ctx *fasthttp.RequestCtx, params map[string]string) {
		c, cancel := s.requestContext(ctx, s.cfg.ActorTimeout)
		defer cancel()
		key, ok := s.authenticate(c, ctx)
		if !ok {
			return
		}
		adm, err := s.cfg.Orgs.Admit(c, key.OrgID, key.MemberID)
		if err != nil {
			s.unavailable(ctx, err)
			return
		}
		switch adm.Code {
		case actors.ReplyOK:
		case actors.ReplyUnknownMember, actors.ReplyNotFound:
			writeProblem(ctx, CodeForbiddenMember, "the key's member no longer belongs to the organization")
			return
		default:
			s.unavailable(ctx, fmt.Errorf("admit: %s", adm.Code))
			return
		}
		h2 := &ctx.Response.Header
		h2.Set("X-RateLimit-Limit", strconv.Itoa(adm.Limit))
		h2.Set("X-RateLimit-Remaining", strconv.Itoa(adm.Remaining))
		reset := int(adm.ResetAt.Sub(s.cfg.Clock.Now()).Seconds() + 0.999)
		h2.Set("X-RateLimit-Reset", strconv.Itoa(max(reset, 0)))
		if !adm.Allowed {
			h2.Set("Retry-After", strconv.Itoa(max(reset, 1)))
			writeProblemLimit(ctx, CodeRateLimited, fmt.Sprintf("the plan allows %d requests per minute", adm.Limit), adm.Limit)
			return
		}
		if len(anyScope) > 0 {
			ok := false
			for _, sc := range anyScope {
				ok = ok || key.HasScope(sc)
			}
			if !ok {
				writeProblem(ctx, CodeForbiddenScope, "the key lacks the scope "+strings.Join(anyScope, " or "))
				return
			}
		}
		plan, _ := s.cfg.Catalog.Plan(adm.Plan)
		h(ctx, &principal{Key: key, Role: adm.Role, Plan: plan, SlotsFull: adm.SlotsFull}, params)
	}
}

// authenticate finds the request's key: its X-API-Key, or the signed-in member of a console call (see
// console_mount.go). false means it answered. A key the node has to look up in the store is limited per
// client address (behind a trusted proxy, the one it forwards for: Config.TrustedProxies) and in flight
// (actors.Keys.Limit): past those it answers 429 or 503 with Retry-After and reads nothing.
func (s *Server) authenticate(c context.Context, ctx *fasthttp.RequestCtx) (actors.APIKey, bool) {
	if key, ok := consoleKey(ctx); ok {
		return key, true
	}
	secret := string(ctx.Request.Header.Peek(headerAPIKey))
	if secret == "" {
		s.cfg.Metrics.authRefused.WithLabelValues(authMissing).Inc()
		writeProblem(ctx, CodeUnauthorized, missingKeyDetail(ctx))
		return actors.APIKey{}, false
	}
	key, err := s.cfg.Keys.AuthenticateFrom(c, secret, s.cfg.TrustedProxies.Of(ctx))
	var refused *authlimit.Refusal
	switch {
	case err == nil:
		return key, true
	case errors.Is(err, actors.ErrInvalidKey):
		s.cfg.Metrics.authRefused.WithLabelValues(authInvalid).Inc()
		writeProblem(ctx, CodeUnauthorized, "the API key is invalid, expired or revoked")
	case errors.As(err, &refused) && refused.Reason == authlimit.AddressSpent:
		s.cfg.Metrics.authRefused.WithLabelValues(authAddressSpent).Inc()
		secs := waitSeconds(refused.RetryAfter)
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(secs))
		writeProblem(ctx, CodeRateLimited, fmt.Sprintf(
			"too many requests with unknown API keys from your address; retry in %d s (a key this node already checked is not limited)", secs))
	case errors.As(err, &refused):
		s.cfg.Metrics.authRefused.WithLabelValues(authInFlightFull).Inc()
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(waitSeconds(refused.RetryAfter)))
		writeProblem(ctx, CodeUnavailable, "too many API keys are being checked right now; retry shortly")
	default:
		s.cfg.Metrics.authRefused.WithLabelValues(authStoreError).Inc()
		s.unavailable(ctx, err)
	}
	return actors.APIKey{}, false
}

// waitSeconds is d as a Retry-After value: whole seconds, rounded up, at least 1.
func waitSeconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}

// unavailable answers 503 when a dependency (storage, an actor) did not answer in time.
func (s *Server) unavailable(ctx *fasthttp.RequestCtx, err error) {
	s.log(ctx).Error().Err(err).Str("path", string(ctx.Path())).Msg("dependency unavailable")
	if aerr := lowDisk(ctx, err); aerr != nil {
		writeAPIError(ctx, aerr)
		return
	}
	ctx.Response.Header.Set("Retry-After", "2")
	writeProblem(ctx, CodeUnavailable, "a dependency did not answer in time; retry shortly")
}

func (s *Server) getAPIKey(ctx *fasthttp.RequestCtx, p *principal, _ map[string]string) {
	ctx.Response.Header.Set("Cache-Control", "no-store")
	writeJSON(ctx, 200, map[string]any{
		"organization_id": p.Key.OrgID,
		"key_id":          p.Key.ID,
		"scopes":          p.Key.Scopes,
	})
}

// fasthttpLogger routes fasthttp's own messages to zerolog.
type fasthttpLogger struct{ l zerolog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) { f.l.Debug().Msgf(format, args...) }
