package http

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/internal/clock"
)

// UploadHostOptions configure signed uploads. They live beside Config because the upload endpoints of the
// API listener need them too: NewUploadHost registers those on API.
type UploadHostOptions struct {
	// API is the API server; POST /uploads and GET /uploads/{upload_id} are registered on it. Nil: the API
	// has no upload endpoints (the upload host still accepts PUTs to URLs signed with Secret).
	API *Server
	// Secret keys the HMAC of signed URLs (at least 16 bytes). Nodes that share a Store must share it.
	Secret []byte
	// PublicURL is the base of signed URLs as clients reach the upload host, e.g. https://upload.example.com.
	PublicURL string
	// WebsiteOrigin is the one browser origin allowed to PUT (CORS), e.g. https://app.example.com. Empty:
	// no browser origin is allowed.
	WebsiteOrigin string
}

// NewUploadHost builds the listener for signed upload URLs: PUT {upload.url} streams the file into the blob
// store, OPTIONS answers CORS preflights for the website origin. It takes no API key: each URL carries its
// own signature, and a request that sends X-API-Key is refused (400) so that keys are not spread into
// browsers and upload tools. cfg needs Store, Blobs, Clock, Logger and Metrics.
func NewUploadHost(cfg Config, opts UploadHostOptions) (*Server, error) {
	if len(opts.Secret) < 16 {
		return nil, errors.New("upload host: the signing secret needs at least 16 bytes")
	}
	if opts.PublicURL == "" {
		return nil, errors.New("upload host: the public URL of signed uploads is not set")
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = 16 << 10
	}
	if cfg.MaxBodyBytes <= 0 {
		// The largest upload any kind allows; serve refuses a larger declared body before routing.
		cfg.MaxBodyBytes = actors.MaxUploadSize
	}
	if cfg.ActorTimeout <= 0 {
		cfg.ActorTimeout = 10 * time.Second
	}
	sign := uploadSigner{secret: opts.Secret, base: strings.TrimRight(opts.PublicURL, "/")}
	s := &Server{cfg: cfg, life: newLifetime()}
	h := &uploadHost{s: s, sign: sign, origin: opts.WebsiteOrigin}
	s.router.handle("GET", "/healthz", noKey(func(ctx *fasthttp.RequestCtx, _ map[string]string) {
		writeJSON(ctx, 200, map[string]string{"status": "ok"})
	}))
	s.router.handle("GET", "/readyz", noKey(s.readyz))
	s.router.handle("PUT", "/uploads/{upload_id}", h.guard(h.put))
	s.router.handle("OPTIONS", "/uploads/{upload_id}", noKey(h.preflight))
	s.cfg.Conns.defaults()
	// The file streams from the connection into the blob store; only streamAhead is read ahead, so a 192 MB
	// upload never sits in memory, and the body is bounded by its progress (Conns.BodyProgress).
	s.srv = newFastServer(s, "filigrane-upload")
	if opts.API != nil {
		opts.API.registerUploadAPI(sign)
	}
	return s, nil
}

// uploadHost serves the signed upload URLs.
type uploadHost struct {
	s      *Server
	sign   uploadSigner
	origin string
}

// corsHeaders allows the website origin to read the answer of a PUT it sent.
func (h *uploadHost) corsHeaders(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Vary", "Origin")
	if o := string(ctx.Request.Header.Peek("Origin")); o != "" && h.origin != "" && o == h.origin {
		ctx.Response.Header.Set("Access-Control-Allow-Origin", o)
		ctx.Response.Header.Set("Access-Control-Expose-Headers", "X-Request-ID")
	}
}

// noKey refuses a request that carries an API key: the upload host never takes one, and answering 400 (not
// ignoring the header) tells the client that its key is being sent where it does not belong.
func noKey(next handler) handler {
	return func(ctx *fasthttp.RequestCtx, params map[string]string) {
		if len(ctx.Request.Header.Peek(headerAPIKey)) > 0 {
			ctx.SetConnectionClose()
			writeProblem(ctx, CodeUploadAPIKey, "the upload host takes no API key; send the request without X-API-Key")
			return
		}
		next(ctx, params)
	}
}

// guard refuses what no upload URL accepts: an API key, and a browser origin other than the website's.
func (h *uploadHost) guard(next func(*fasthttp.RequestCtx, string)) handler {
	return func(ctx *fasthttp.RequestCtx, params map[string]string) {
		h.corsHeaders(ctx)
		if len(ctx.Request.Header.Peek(headerAPIKey)) > 0 {
			ctx.SetConnectionClose()
			writeProblem(ctx, CodeUploadAPIKey, "signed upload URLs take no API key; send the file without X-API-Key")
			return
		}
		// Browsers send Origin on every cross-origin PUT; tools send none. A browser page of another origin
		// must not be able to upload even when it skips the preflight.
		if o := string(ctx.Request.Header.Peek("Origin")); o != "" && o != h.origin {
			ctx.SetConnectionClose()
			writeProblem(ctx, CodeOriginNotAllowed, "uploads from this origin are not allowed")
			return
		}
		next(ctx, params["upload_id"])
	}
}

// preflight answers a CORS preflight: the CORS headers for the website origin, 403 without any for others.
func (h *uploadHost) preflight(ctx *fasthttp.RequestCtx, _ map[string]string) {
	ctx.Response.Header.Set("Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers")
	origin := string(ctx.Request.Header.Peek("Origin"))
	method := string(ctx.Request.Header.Peek("Access-Control-Request-Method"))
	if origin == "" || h.origin == "" || origin != h.origin || (method != "" && method != "PUT") {
		writeProblem(ctx, CodeOriginNotAllowed, "uploads from this origin are not allowed")
		return
	}
	hd := &ctx.Response.Header
	hd.Set("Access-Control-Allow-Origin", origin)
	hd.Set("Access-Control-Allow-Methods", "PUT")
	// Only what a browser sends with a file; X-API-Key is deliberately absent.
	hd.Set("Access-Control-Allow-Headers", "Content-Type")
	hd.Set("Access-Control-Max-Age", "600")
	ctx.SetStatusCode(204)
}

// errBodyShort and errBodyLong abort a blob Put whose body is not exactly the declared size; Put then leaves
// nothing stored.
var (
	errBodyShort = errors.New("body shorter than the declared size")
	errBodyLong  = errors.New("body longer than the declared size")
)

// exactReader passes exactly want bytes through and fails on fewer or more. Bytes past want are never
// passed on, so the stored copy (and its staging file) never exceeds the declared size, and the read that
// sees the first extra byte fails at once.
type exactReader struct {
	r    io.Reader
	want int64
	n    int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.n >= e.want+1 {
		return 0, errBodyLong
	}
	// Ask for one byte past the declared size, so that a longer body is noticed.
	if rest := e.want - e.n + 1; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := e.r.Read(p)
	e.n += int64(n)
	switch {
	case e.n > e.want:
		return n - int(e.n-e.want), errBodyLong
	case errors.Is(err, io.EOF) && e.n < e.want:
		return n, errBodyShort
	}
	return n, err
}

// clientBody is the client's body stream; it keeps the stream's read error, which tells a body that did not
// arrive (the client's connection broke: 400, send it again) from a store that did not take what arrived
// (503, retry).
type clientBody struct {
	r   io.Reader
	err error
}

func (c *clientBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		c.err = err
	}
	return n, err
}

// leasedReader renews a PUT's lease on its upload while the body moves: a PUT that stalls stops renewing
// (and the connection's progress deadline ends it); a PUT whose node died stops holding the upload once
// the lease runs out.
type leasedReader struct {
	r     io.Reader
	clock clock.Clock
	every time.Duration
	last  time.Time
	renew func() error
}

func (l *leasedReader) Read(p []byte) (int, error) {
	if now := l.clock.Now(); now.Sub(l.last) >= l.every {
		if err := l.renew(); err != nil {
			return 0, err
		}
		l.last = now
	}
	return l.r.Read(p)
}

func (h *uploadHost) put(ctx *fasthttp.RequestCtx, id string) {
	c, cancel := h.s.requestContext(ctx, 30*time.Minute)
	defer cancel()
	if aerr := h.putErr(c, ctx, id); aerr != nil {
		ctx.SetConnectionClose() // the body may be unread
		writeProblem(ctx, aerr.code, aerr.detail)
	}
}

func (h *uploadHost) putErr(c context.Context, ctx *fasthttp.RequestCtx, id string) *apiError {
	s := h.s
	uploads := s.uploads()
	args := ctx.QueryArgs()
	// An unknown upload reads like a bad signature: the URL was not made by us.
	if !actors.ValidUploadID(id) {
		return newAPIError(CodeUploadSignature, "the upload URL is not valid")
	}
	lctx, lcancel := context.WithTimeout(c, s.cfg.ActorTimeout)
	u, _, err := uploads.Load(lctx, id)
	lcancel()
	if errors.Is(err, actors.ErrUploadNotFound) {
		return newAPIError(CodeUploadSignature, "the upload URL is not valid")
	}
	if err != nil {
		return s.uploadError(c, id, err)
	}
	now := s.cfg.Clock.Now()
	switch err := h.sign.verify(u, string(args.Peek("expires")), string(args.Peek("signature")), now); {
	case errors.Is(err, errURLExpired):
		return newAPIError(CodeUploadURLExpired, "the upload URL expired at %s; create a new upload", u.URLExpiresAt.UTC().Format(time.RFC3339))
	case err != nil:
		return newAPIError(CodeUploadSignature, "the upload URL is not valid; send it exactly as it was given")
	}
	switch u.StatusAt(now) {
	case actors.UploadPending:
	case actors.UploadExpired:
		return newAPIError(CodeUploadExpired, "upload %s expired", id)
	default:
		return newAPIError(CodeUploadReceived, "upload %s already received its file", id)
	}
	if ct := string(ctx.Request.Header.ContentType()); strings.HasPrefix(ct, "multipart/") {
		if mt, _, _ := mime.ParseMediaType(ct); mt == "multipart/form-data" {
			return newAPIError(CodeUnsupportedMedia, "send the file bytes as the PUT body, not a form")
		}
	}
	// A declared length that is not the upload's size is refused before anything is read or stored.
	if cl := ctx.Request.Header.ContentLength(); cl >= 0 && int64(cl) != u.Size {
		if int64(cl) > u.Size {
			return newAPIError(CodeFileTooLarge, "the body has %d bytes; upload %s declared %d", cl, id, u.Size)
		}
		return newAPIError(CodeUploadSizeMismatch, "the body has %d bytes; upload %s declared %d", cl, id, u.Size)
	}
	// One body at a time: the PUT takes a lease on the upload record (compare-and-set, so it holds across
	// nodes). A second PUT is refused at once instead of streaming a copy that could only be thrown away.
	token := randomSuffix()
	if _, err := uploads.Update(c, id, func(u *actors.Upload, now time.Time) error {
		return u.BeginPut(token, s.cfg.PutHolder, now, actors.UploadPutLease)
	}); err != nil {
		if errors.Is(err, actors.ErrUploadInUse) {
			return newAPIError(CodeUploadInUse, "another PUT is sending the file of upload %s; wait for its answer", id)
		}
		return s.uploadError(c, id, err)
	}
	received := false
	defer func() {
		if !received { // a refused or broken body frees the upload for the next PUT at once
			_, _ = uploads.Update(context.WithoutCancel(c), id, func(u *actors.Upload, _ time.Time) error {
				u.EndPut(token)
				return nil
			})
		}
	}()
	var raw io.Reader = ctx.RequestBodyStream()
	if raw == nil {
		raw = bytes.NewReader(ctx.Request.Body())
	}
	client := &clientBody{r: raw}
	var body io.Reader = &leasedReader{r: client, clock: s.cfg.Clock, every: actors.UploadPutLease / 3, last: s.cfg.Clock.Now(),
		renew: func() error {
			_, err := uploads.Update(c, id, func(u *actors.Upload, now time.Time) error {
				return u.RenewPut(token, now, actors.UploadPutLease)
			})
			return err
		}}
	key := "uploads/" + u.OrgID + "/" + id + "/" + randomSuffix()
	// Put removes what it staged when the body fails, so a broken PUT leaves nothing behind.
	info, err := s.cfg.Blobs.Put(c, key, &exactReader{r: body, want: u.Size})
	switch {
	case errors.Is(err, errBodyLong):
		return newAPIError(CodeFileTooLarge, "the body is longer than the %d bytes upload %s declared", u.Size, id)
	case errors.Is(err, errBodyShort):
		return newAPIError(CodeUploadSizeMismatch, "the body is shorter than the %d bytes upload %s declared", u.Size, id)
	case errors.Is(err, actors.ErrUploadPutLost):
		return newAPIError(CodeUploadInUse, "this PUT stalled and another PUT took over upload %s", id)
	case err != nil && client.err != nil:
		s.log(ctx).Warn().Err(err).Str("upload", id).Msg("receive upload body")
		return newAPIError(CodeBadRequest, "the body could not be received completely; send the file again")
	case err != nil:
		// The body arrived intact as far as it was read: the store did not take it (down, or its lease could
		// not be renewed). Not the client's fault: 503, and the same PUT again once the store answers.
		s.log(ctx).Warn().Err(err).Str("upload", id).Msg("store upload")
		if aerr := lowDisk(ctx, err); aerr != nil {
			return aerr
		}
		// The store's error names keys and paths: it stays in the log above.
		ctx.Response.Header.Set("Retry-After", "2")
		return newAPIError(CodeUnavailable, "the file could not be stored in time; send it again")
	}
	u, err = uploads.Update(context.WithoutCancel(c), id, func(u *actors.Upload, now time.Time) error {
		if u.Put == nil || u.Put.Token != token {
			return actors.ErrUploadPutLost
		}
		return u.Receive(key, info.SHA256, info.Size, now)
	})
	if err != nil {
		// The upload expired meanwhile, or this PUT's lease lapsed and another took over: this copy is not
		// needed.
		_ = s.cfg.Blobs.Delete(context.WithoutCancel(c), key)
		if errors.Is(err, actors.ErrUploadPutLost) {
			return newAPIError(CodeUploadInUse, "this PUT stalled and another PUT took over upload %s", id)
		}
		return s.uploadError(c, id, err)
	}
	received = true
	writeJSON(ctx, 200, renderUpload(h.sign, u, s.cfg.Clock.Now()))
	return nil
}

// isJSONType reports whether a Content-Type is JSON (application/json or a +json type).
func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}
