package http

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/actors/jobstate"
	"filigrane/persistence"
)

// uploadOutcome is what became of a request that used an upload.
type uploadOutcome int

const (
	// uploadConsumed: the request was accepted (a job, or a synchronous detection); the upload is used up.
	uploadConsumed uploadOutcome = iota
	// uploadReleased: a refusal that can be retried (credits, concurrency, a sync detection too large to
	// answer in the request); the upload stays usable.
	uploadReleased
	// uploadRejected: the file cannot be used; the upload is rejected with the request's error.
	uploadRejected
)

func (s *Server) uploads() actors.Uploads {
	return actors.Uploads{Store: s.cfg.Store, Clock: s.cfg.Clock}
}

// claimUploadFor locks a received upload of the caller's organization for request reqID and returns its
// file. The endpoints of a kind call it: an embed needs an upload of that kind, a detection a `detect` upload
// of a file of that kind.
func (s *Server) claimUploadFor(c context.Context, p *principal, uploadID, reqID string, op jobstate.Operation, media actors.UploadMedia) (*storedFile, *apiError) {
	if !actors.ValidUploadID(uploadID) {
		return nil, newAPIError(CodeNotFound, "upload %q is unknown", truncate(uploadID, 64))
	}
	kind := actors.UploadDetect
	if op == jobstate.OperationEmbed {
		kind = actors.UploadKind(media)
	}
	var found *actors.Upload
	u, err := s.uploads().Update(c, uploadID, func(u *actors.Upload, now time.Time) error {
		if u.OrgID != p.Key.OrgID {
			return actors.ErrUploadNotFound
		}
		found = u
		return u.Claim(reqID, kind, media, now)
	})
	if errors.Is(err, actors.ErrUploadKind) {
		return nil, newAPIError(CodeUploadKind, "%s", uploadKindMessage(uploadID, found, kind, media))
	}
	if err != nil {
		return nil, s.uploadError(c, uploadID, err)
	}
	return &storedFile{Key: u.BlobKey, Info: persistence.BlobInfo{Size: u.Size, SHA256: u.SHA256},
		Filename: u.Filename, ConsumedByRequest: u.Status == actors.UploadConsumed && u.RequestID == reqID}, nil
}

// uploadError maps an upload state machine error to its problem.
func (s *Server) uploadError(c context.Context, uploadID string, err error) *apiError {
	switch {
	case errors.Is(err, actors.ErrUploadNotFound):
		return newAPIError(CodeNotFound, "upload %s is unknown", uploadID)
	case errors.Is(err, actors.ErrUploadNotReceived):
		return newAPIError(CodeUploadNotReceived, "upload %s has no file yet; finish the PUT to its URL, then retry", uploadID)
	case errors.Is(err, actors.ErrUploadInUse):
		return newAPIError(CodeUploadInUse, "upload %s is being used by another request", uploadID)
	case errors.Is(err, actors.ErrUploadConsumed):
		return newAPIError(CodeUploadConsumed, "upload %s was used by another request; create a new upload, or retry with the original Idempotency-Key", uploadID)
	case errors.Is(err, actors.ErrUploadRejected):
		// err reads "upload rejected: <the problem detail the using request got>".
		return newAPIError(CodeUploadRejected, "upload %s cannot be used: %s; create a new upload", uploadID,
			strings.TrimPrefix(err.Error(), actors.ErrUploadRejected.Error()+": "))
	case errors.Is(err, actors.ErrUploadExpired):
		return newAPIError(CodeUploadExpired, "upload %s expired; uploads are kept 24 hours", uploadID)
	case errors.Is(err, actors.ErrUploadKind):
		return newAPIError(CodeUploadKind, "upload %s was created for another kind of request", uploadID)
	case errors.Is(err, actors.ErrUploadNotPending):
		return newAPIError(CodeUploadReceived, "upload %s already received its file", uploadID)
	}
	s.log(c).Error().Err(err).Str("upload", uploadID).Msg("upload store")
	return newAPIError(CodeUnavailable, "the upload could not be read or written in time; retry")
}

// settleUpload records the outcome of a request that claimed an upload. It cannot fail the request any more
// (the answer is decided): an error is logged, and a lock left behind lapses with its lease.
func (s *Server) settleUpload(c context.Context, p *principal, uploadID, reqID string, outcome uploadOutcome, aerr *apiError) {
	_, err := s.uploads().Update(c, uploadID, func(u *actors.Upload, now time.Time) error {
		switch outcome {
		case uploadConsumed:
			return u.Consume(reqID, now)
		case uploadRejected:
			code, detail := CodeInternal, "the file cannot be used"
			if aerr != nil {
				code, detail = aerr.code, aerr.detail
			}
			return u.Reject(reqID, string(code), detail)
		default:
			return u.Release(reqID)
		}
	})
	if err != nil {
		s.log(c).Error().Err(err).Str("upload", uploadID).Str("request", reqID).Int("outcome", int(outcome)).Msg("settle upload")
	}
}

// uploadRoutes registers the upload endpoints on the API listener. They need the upload host's signing
// secret and public address, which Config does not carry, so NewUploadHost registers them on the API server
// it is given (registerUploadAPI); an API server without an upload host has no upload endpoints.
func (s *Server) uploadRoutes() {}

// uploadAPI serves POST /uploads and GET /uploads/{upload_id} on the API listener.
type uploadAPI struct {
	s    *Server
	sign uploadSigner
}

func (s *Server) registerUploadAPI(sign uploadSigner) {
	a := &uploadAPI{s: s, sign: sign}
	either := []string{actors.ScopeEmbed, actors.ScopeDetect}
	s.router.handle("POST", "/uploads", s.authed(either, a.create))
	s.router.handle("GET", "/uploads/{upload_id}", s.authed(either, a.get))
	s.batchRoutes(sign) // batches hand out signed upload URLs too (batches.go)
}

// uploadTarget is where and how to send the file.
type uploadTarget struct {
	Method    string `json:"method"`
	URL       string `json:"url"`
	ExpiresAt string `json:"expires_at"`
}

// uploadResource is the upload resource (spec 2.5). request_id and error appear once set.
type uploadResource struct {
	UploadID  string       `json:"upload_id"`
	Status    string       `json:"status"`
	Kind      string       `json:"kind"`
	Filename  string       `json:"filename"`
	Size      int64        `json:"size"`
	CreatedAt string       `json:"created_at"`
	ExpiresAt string       `json:"expires_at"`
	Upload    uploadTarget `json:"upload"`
	RequestID string       `json:"request_id,omitempty"`
	Error     string       `json:"error,omitempty"`
	ErrorCode string       `json:"error_code,omitempty"`
}

func renderUpload(sign uploadSigner, u *actors.Upload, now time.Time) uploadResource {
	return uploadResource{
		UploadID: u.ID, Status: string(u.StatusAt(now)), Kind: string(u.Kind), Filename: u.Filename, Size: u.Size,
		CreatedAt: u.CreatedAt.UTC().Format(time.RFC3339), ExpiresAt: u.ExpiresAt.UTC().Format(time.RFC3339),
		Upload:    uploadTarget{Method: "PUT", URL: sign.url(u), ExpiresAt: u.URLExpiresAt.UTC().Format(time.RFC3339)},
		RequestID: u.RequestID, Error: u.Error, ErrorCode: u.ErrorCode,
	}
}

// readSmallBody reads a request body of at most limit bytes, streamed or not.
func readSmallBody(ctx *fasthttp.RequestCtx, limit int64) ([]byte, bool, error) {
	var r io.Reader = ctx.RequestBodyStream()
	if r == nil {
		b := ctx.Request.Body()
		return b, int64(len(b)) <= limit, nil
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, false, err
	}
	return b, int64(len(b)) <= limit, nil
}

func (a *uploadAPI) create(ctx *fasthttp.RequestCtx, p *principal, _ map[string]string) {
	if !jsonBodyType(string(ctx.Request.Header.ContentType())) {
		ctx.SetConnectionClose()
		writeProblem(ctx, CodeUnsupportedMedia, "send the body as application/json")
		return
	}
	if cl := ctx.Request.Header.ContentLength(); cl > maxUploadRequestBody {
		ctx.SetConnectionClose()
		writeProblem(ctx, CodeTooLarge, "the body exceeds 64 KB")
		return
	}
	body, ok, err := readSmallBody(ctx, maxUploadRequestBody)
	if err != nil {
		ctx.SetConnectionClose()
		writeProblem(ctx, CodeBadRequest, "the body could not be read")
		return
	}
	if !ok {
		ctx.SetConnectionClose()
		writeProblem(ctx, CodeTooLarge, "the body exceeds 64 KB")
		return
	}
	req, aerr := parseUploadRequest(body)
	if aerr != nil {
		writeProblem(ctx, aerr.code, aerr.detail)
		return
	}
	if scope := uploadScope(req.Kind); !p.Key.HasScope(scope) {
		writeProblem(ctx, CodeForbiddenScope, article(string(req.Kind))+" "+string(req.Kind)+" upload needs the scope "+scope)
		return
	}
	now := a.s.cfg.Clock.Now()
	u, err := actors.NewUpload(actors.NewUploadID(), p.Key.OrgID, req.Kind, req.Filename, req.Size, now)
	switch {
	case errors.Is(err, actors.ErrUploadTooLarge):
		writeProblem(ctx, CodeFileTooLarge, err.Error())
		return
	case err != nil:
		writeProblem(ctx, CodeInvalidRequest, err.Error())
		return
	}
	media := string(u.Media)
	if !p.Plan.HasFormat(media) {
		writeProblem(ctx, CodeForbiddenPlan, "the "+p.Plan.Name+" plan does not include "+media+" files")
		return
	}
	c, cancel := a.s.requestContext(ctx, a.s.cfg.ActorTimeout)
	defer cancel()
	if err := a.s.uploads().Create(c, u); err != nil {
		a.s.unavailable(ctx, err)
		return
	}
	a.s.setLocation(ctx, "/uploads/"+u.ID)
	writeJSON(ctx, 201, renderUpload(a.sign, u, now))
}

func (a *uploadAPI) get(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	id := params["upload_id"]
	if !actors.ValidUploadID(id) {
		writeProblem(ctx, CodeNotFound, "no such upload")
		return
	}
	c, cancel := a.s.requestContext(ctx, a.s.cfg.ActorTimeout)
	defer cancel()
	u, _, err := a.s.uploads().Load(c, id)
	if errors.Is(err, actors.ErrUploadNotFound) || (err == nil && u.OrgID != p.Key.OrgID) {
		writeProblem(ctx, CodeNotFound, "no such upload")
		return
	}
	if err != nil {
		a.s.unavailable(ctx, err)
		return
	}
	// Reading an upload needs the scope that creates one of its kind, as a job's status needs its operation's
	// scope (spec 4.2): the resource carries the signed URL that sends its file.
	if scope := uploadScope(u.Kind); !p.Key.HasScope(scope) {
		writeProblem(ctx, CodeForbiddenScope, "the key lacks the scope "+scope)
		return
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	writeJSON(ctx, 200, renderUpload(a.sign, u, a.s.cfg.Clock.Now()))
}

// uploadScope is the scope that creates and reads an upload of kind (spec 4.3): watermarks:detect for a detect
// upload, watermarks:embed for the others.
func uploadScope(kind actors.UploadKind) string {
	if kind == actors.UploadDetect {
		return actors.ScopeDetect
	}
	return actors.ScopeEmbed
}

// uploadKindMessage says, in words, why an upload does not fit the endpoint: what it was created for and what
// the endpoint needs.
func uploadKindMessage(uploadID string, u *actors.Upload, kind actors.UploadKind, media actors.UploadMedia) string {
	if u != nil && u.BatchID != "" {
		return "upload " + uploadID + " belongs to an item of batch " + u.BatchID + "; only that batch uses it"
	}
	need := article(string(kind)) + " " + string(kind) + " upload"
	if kind == actors.UploadDetect {
		need = "a detect upload of " + article(string(media)) + " " + string(media)
	}
	have := "another kind of request"
	if u != nil {
		have = "embedding " + article(string(u.Kind)) + " " + string(u.Kind)
		if u.Kind == actors.UploadDetect {
			have = "detecting in " + article(string(u.Media)) + " " + string(u.Media)
		}
	}
	return fmt.Sprintf("upload %s was created for %s; this endpoint needs %s", uploadID, have, need)
}

func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}
