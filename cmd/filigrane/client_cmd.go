package main

// The API client subcommands (embed, detect, jobs) talk to a running server over HTTP. They share one flag
// set, one error classification (exit codes, docs/cli.md) and one way to print problems; they never touch a
// data directory (that is admin) or run the codec locally (that is codec).

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
	"filigrane/internal/hiddenchar"
)

// Exit codes of the client subcommands by error class (docs/cli.md keeps the same table).
const (
	exitOK          = 0
	exitUsage       = 1 // bad flags or arguments, unreadable local file
	exitClient      = 2 // the server refused the request (4xx other than below)
	exitAuth        = 3 // 401 or 403: missing, wrong or under-scoped key
	exitCredits     = 4 // 402: too few credits
	exitServer      = 5 // 5xx, 503 unavailable, 429 after the server said to wait
	exitNetwork     = 6 // the server could not be reached or the connection broke
	exitJobFailed   = 7 // the job finished as failed (its error_code is printed)
	defaultBaseURL  = "http://127.0.0.1:8080"
	envAPIKey       = "FILIGRANE_API_KEY"
	envBaseURL      = "FILIGRANE_URL"
	envCACert       = "FILIGRANE_CA_CERT"
	maxJSONResponse = 16 << 20
)

// clientError is an error with its exit code; a problem body's code and detail are part of the message.
type clientError struct {
	exit int
	msg  string
	// body is the server's JSON answer when there was one (printed with --json).
	body []byte
}

func (e *clientError) Error() string { return e.msg }

func usageErr(format string, a ...any) error {
	return &clientError{exit: exitUsage, msg: fmt.Sprintf(format, a...)}
}

// clientOpts are the flags every client subcommand takes.
type clientOpts struct {
	url, key   string
	caCert     string
	jsonOut    bool
	quiet      bool
	progress   string
	timeout    time.Duration
	pollMax    time.Duration
	stdout     io.Writer
	stderr     io.Writer
	httpClient *http.Client
}

func (o *clientOpts) register(fs *flag.FlagSet) {
	fs.StringVar(&o.url, "url", "", "server base URL (default: $"+envBaseURL+", else "+defaultBaseURL+")")
	fs.StringVar(&o.key, "key", "", "API key (default: $"+envAPIKey+")")
	fs.StringVar(&o.caCert, "ca-cert", "", "PEM file of the CA that signed the server's certificates, for a server with a private CA (default: $"+envCACert+", else the system's roots)")
	fs.BoolVar(&o.jsonOut, "json", false, "print the server's JSON (receipts, results, problems) for scripts")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress bar and no informational lines on stderr")
	fs.StringVar(&o.progress, "progress", "auto", "upload progress bar on stderr: auto (when stderr is a terminal), always, never")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "limit of the whole command, --wait included")
	fs.DurationVar(&o.pollMax, "poll-max", 30*time.Second, "longest pause between job status polls with --wait (the server's Retry-After is followed up to this)")
}

// finish fills defaults from the environment after parsing.
func (o *clientOpts) finish() error {
	if o.url == "" {
		o.url = os.Getenv(envBaseURL)
	}
	if o.url == "" {
		o.url = defaultBaseURL
	}
	u, err := url.Parse(o.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageErr("--url %q is not an http(s) base URL", o.url)
	}
	o.url = strings.TrimRight(o.url, "/")
	if o.key == "" {
		o.key = os.Getenv(envAPIKey)
	}
	if o.key == "" {
		return usageErr("no API key: set $%s or pass --key", envAPIKey)
	}
	switch o.progress {
	case "auto", "always", "never":
	default:
		return usageErr("--progress must be auto, always or never, not %q", o.progress)
	}
	if o.caCert == "" {
		o.caCert = os.Getenv(envCACert)
	}
	if o.httpClient == nil {
		o.httpClient = &http.Client{}
		if o.caCert != "" {
			pem, err := os.ReadFile(o.caCert)
			if err != nil {
				return usageErr("--ca-cert: %v", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return usageErr("--ca-cert: %s holds no PEM certificate", o.caCert)
			}
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
			o.httpClient = &http.Client{Transport: tr}
		}
	}
	return nil
}

// showBar says whether an upload shows a progress bar: never with --quiet, and by default only on a terminal.
func (o *clientOpts) showBar() bool {
	if o.quiet || o.progress == "never" {
		return false
	}
	if o.progress == "always" {
		return true
	}
	f, ok := o.stderr.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func (o *clientOpts) info(format string, a ...any) {
	if !o.quiet {
		fmt.Fprintf(o.stderr, format+"\n", a...)
	}
}

// parseClientFlags parses args with fs (whose own flags are registered already) and the common options.
// Flags may follow positional arguments ("embed photo.jpg --json").
func parseClientFlags(fs *flag.FlagSet, o *clientOpts, args []string) ([]string, error) {
	o.register(fs)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &clientError{exit: exitUsage, msg: err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return pos, o.finish()
}

// clientExit prints err (code and detail of a problem on stderr; the problem JSON on stdout with --json) and
// returns the exit code.
func clientExit(name string, o *clientOpts, err error) int {
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	var ce *clientError
	if !errors.As(err, &ce) {
		ce = &clientError{exit: exitNetwork, msg: err.Error()}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			ce.exit = exitNetwork
		}
	}
	if o.jsonOut && len(ce.body) > 0 {
		o.stdout.Write(bytes.TrimSpace(ce.body))
		fmt.Fprintln(o.stdout)
	}
	fmt.Fprintf(o.stderr, "filigrane %s: %s\n", name, ce.msg)
	return ce.exit
}

// problemBody is the part of an RFC 9457 problem the client prints; "error" covers bodies that nest it.
type problemBody struct {
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail"`
	Code      string `json:"code"`
	RequestID string `json:"request_id"`
	Error     *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// statusError classifies a non-2xx answer and renders its problem as "CODE: detail (HTTP n, request r)".
func statusError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var p problemBody
	_ = json.Unmarshal(body, &p)
	code, detail := p.Code, p.Detail
	if p.Error != nil {
		if code == "" {
			code = p.Error.Code
		}
		if detail == "" {
			detail = p.Error.Message
		}
	}
	if detail == "" {
		detail = p.Title
	}
	if detail == "" {
		detail = hiddenchar.Remote(strings.TrimSpace(string(body)), 200) // a proxy's page, say: its start
	}
	if code == "" {
		code = "http_" + strconv.Itoa(resp.StatusCode)
	}
	// The answer may come from a proxy in front of the node, and a detail may quote a remote server: printed
	// escaped and bounded (remoteText), so no escape sequence in it reaches the terminal.
	msg := fmt.Sprintf("%s: %s (HTTP %d", remoteText(code), remoteText(detail), resp.StatusCode)
	if p.RequestID != "" {
		msg += ", request " + remoteText(p.RequestID)
	}
	msg += ")"
	exit := exitClient
	switch {
	case resp.StatusCode == 401 || resp.StatusCode == 403:
		exit = exitAuth
	case resp.StatusCode == 402:
		exit = exitCredits
	case resp.StatusCode == 429 || resp.StatusCode >= 500:
		exit = exitServer
	}
	if !json.Valid(body) {
		body = nil
	}
	return &clientError{exit: exit, msg: msg, body: body}
}

// do sends req with the key and returns a 2xx response; anything else becomes a classified error.
func (o *clientOpts) do(req *http.Request, withKey bool) (*http.Response, error) {
	if withKey {
		req.Header.Set("X-API-Key", o.key)
	}
	req.Header.Set("User-Agent", "filigrane-cli/"+version)
	resp, err := o.httpClient.Do(req)
	if err != nil {
		return nil, &clientError{exit: exitNetwork, msg: fmt.Sprintf("%s %s: %v", req.Method, req.URL.Redacted(), err)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, statusError(resp)
	}
	return resp, nil
}

// getFile sends a GET with the key to path and returns the 2xx answer, whose body (a file: a result, an
// asset's content, an archive) the caller reads and closes.
func (o *clientOpts) getFile(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.url+path, nil)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	return o.do(req, true)
}

func (o *clientOpts) getJSON(ctx context.Context, path string, v any) ([]byte, http.Header, error) {
	return o.sendJSON(ctx, http.MethodGet, path, "", nil, v)
}

// sendJSON sends a request with the key to path, in (nil: no body) as its JSON body and idem as its
// Idempotency-Key (when not empty), and decodes a 2xx answer into out (nil: not decoded). It returns the
// answer's bytes (none for 204) and headers. Every JSON call of the client goes through it, so that a refusal
// is classified and printed in one place (do, statusError).
func (o *clientOpts) sendJSON(ctx context.Context, method, path, idem string, in, out any) ([]byte, http.Header, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, nil, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, o.url+path, body)
	if err != nil {
		return nil, nil, fmt.Errorf("build request: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := o.do(req, true)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		return nil, resp.Header, nil
	}
	return readJSON(resp, out)
}

// deadline bounds ctx by --timeout.
func (o *clientOpts) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if o.timeout > 0 {
		return context.WithTimeout(ctx, o.timeout)
	}
	return context.WithCancel(ctx)
}

// oneArg is the single positional argument a subcommand takes, what naming it in the usage error.
func oneArg(pos []string, what string) (string, error) {
	if len(pos) != 1 {
		return "", usageErr("want exactly one %s, got %d arguments", what, len(pos))
	}
	return pos[0], nil
}

// pollUntil GETs path until seen, given each answer's JSON, reports it final, pausing between polls as the
// server's Retry-After says (1 s without one, at most --poll-max). It returns the last answer. Jobs and
// batches are followed with it.
func (o *clientOpts) pollUntil(ctx context.Context, what, path string, seen func(body []byte) (bool, error)) ([]byte, error) {
	for {
		body, hdr, err := o.getJSON(ctx, path, nil)
		if err != nil {
			return nil, err
		}
		final, err := seen(body)
		if err != nil || final {
			return body, err
		}
		pause := time.Second
		if s, err := strconv.Atoi(hdr.Get("Retry-After")); err == nil && s > 0 {
			pause = time.Duration(s) * time.Second
		}
		t := time.NewTimer(min(pause, o.pollMax))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, &clientError{exit: exitNetwork, msg: fmt.Sprintf("waiting for %s: %v", what, ctx.Err())}
		case <-t.C:
		}
	}
}

// decodeAnswer decodes a 2xx answer's JSON into v, or says the server's answer is not what was expected.
func decodeAnswer(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return &clientError{exit: exitServer, msg: fmt.Sprintf("the server's answer is not the expected JSON: %v", err)}
	}
	return nil
}

func readJSON(resp *http.Response, v any) ([]byte, http.Header, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONResponse))
	if err != nil {
		return nil, nil, &clientError{exit: exitNetwork, msg: fmt.Sprintf("read response: %v", err)}
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			return nil, nil, &clientError{exit: exitServer, msg: fmt.Sprintf("the server's answer is not the expected JSON: %v", err)}
		}
	}
	return body, resp.Header, nil
}

// kindOf picks the media kind from --kind or the file's extension.
func kindOf(flagKind, file string) (mediakind.Kind, error) {
	if flagKind != "" {
		for _, k := range mediakind.Table() {
			if string(k.Media) == flagKind {
				return k, nil
			}
		}
		return mediakind.Kind{}, usageErr("--kind must be image, document or video, not %q", flagKind)
	}
	k, ok := mediakind.ByFilename(file)
	if !ok {
		return mediakind.Kind{}, usageErr("cannot tell the media kind of %q from its extension: pass --kind image|document|video", file)
	}
	return k, nil
}

// mediaFlags are the flags of the commands that send one media file (embed, detect).
type mediaFlags struct {
	forceUpload *bool
	directLimit *int64
	kind        *string
	accel       *string
}

func registerMediaFlags(fs *flag.FlagSet) mediaFlags {
	return mediaFlags{
		forceUpload: fs.Bool("upload", false, "send the file through a signed upload even when it is small"),
		directLimit: fs.Int64("direct-limit", 0, "largest file sent directly, in bytes; larger ones go through a signed upload (default: the kind's limit in this build's media-kind table; set it to the server's when that is configured otherwise)"),
		kind:        fs.String("kind", "", "media kind: image, document or video (default: from the extension)"),
		accel:       fs.String("accelerator", "", "cpu (default) or gpu"),
	}
}

// mediaInput is the file a media command sends: its kind, and its upload id when it went through a signed
// upload.
type mediaInput struct {
	file     string
	kind     mediakind.Kind
	uploadID string
}

// prepare checks the one FILE argument and sends it through a signed upload when it is over the direct limit
// of op (or --upload says so); uploadKind is the upload's kind ("detect" for detection).
func (m mediaFlags) prepare(ctx context.Context, o *clientOpts, pos []string, op jobstate.Operation, uploadKind string) (mediaInput, error) {
	file, err := oneArg(pos, "FILE")
	if err != nil {
		return mediaInput{}, err
	}
	kind, err := kindOf(*m.kind, file)
	if err != nil {
		return mediaInput{}, err
	}
	size, err := statFile(file)
	if err != nil {
		return mediaInput{}, err
	}
	in := mediaInput{file: file, kind: kind}
	limit := kind.DirectLimit(op)
	if *m.directLimit > 0 {
		limit = *m.directLimit
	}
	if *m.forceUpload || size > limit {
		if uploadKind == "" {
			uploadKind = string(kind.Media)
		}
		o.info("uploading %s (%d bytes) through a signed upload", file, size)
		if in.uploadID, err = o.signedUpload(ctx, uploadKind, file, size); err != nil {
			return mediaInput{}, err
		}
	}
	return in, nil
}

// statFile is the size of a regular file the client is to send.
func statFile(file string) (int64, error) {
	st, err := os.Stat(file)
	if err != nil {
		return 0, usageErr("%v", err)
	}
	if !st.Mode().IsRegular() {
		return 0, usageErr("%s is not a regular file", file)
	}
	return st.Size(), nil
}

// upload is the part of the upload resource the client needs.
type upload struct {
	UploadID string `json:"upload_id"`
	Upload   struct {
		Method string `json:"method"`
		URL    string `json:"url"`
	} `json:"upload"`
}

// signedUpload creates an upload of kind for the file and PUTs the file to its signed URL, with a progress bar
// on stderr when showBar says so. It returns the upload id.
func (o *clientOpts) signedUpload(ctx context.Context, kind, file string, size int64) (string, error) {
	var up upload
	if _, _, err := o.sendJSON(ctx, http.MethodPost, "/uploads", "", map[string]any{"kind": kind, "filename": filepath.Base(file), "size": size}, &up); err != nil {
		return "", err
	}
	if up.UploadID == "" || up.Upload.URL == "" {
		return "", &clientError{exit: exitServer, msg: "the upload resource has no upload_id or url"}
	}
	bar := o.newBar(size, "uploading "+filepath.Base(file), true)
	if err := o.putFile(ctx, up.Upload.Method, up.Upload.URL, file, bar); err != nil {
		return "", err
	}
	if bar != nil {
		_ = bar.Finish()
	}
	return up.UploadID, nil
}

// mediaRequest posts the file (or its upload id) to path as multipart with the extra fields.
func (o *clientOpts) mediaRequest(ctx context.Context, path, file, uploadID string, fields map[string]string, idem string) (*http.Response, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := func() error {
			for k, v := range fields {
				if err := mw.WriteField(k, v); err != nil {
					return err
				}
			}
			if uploadID != "" {
				if err := mw.WriteField("upload_id", uploadID); err != nil {
					return err
				}
			} else {
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				defer f.Close()
				part, err := mw.CreateFormFile("file", filepath.Base(file))
				if err != nil {
					return err
				}
				if _, err := io.Copy(part, f); err != nil {
					return err
				}
			}
			return mw.Close()
		}()
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url+path, pr)
	if err != nil {
		pr.Close()
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	// After a chunked multipart embed the server parses what is left of the body on the connection as a next
	// request and answers it 400 (seen on main, Nov 2026); a reused connection would hand that 400 to the next
	// call, so each streamed multipart request gets its own connection.
	req.Close = true
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := o.do(req, true)
	pr.Close()
	return resp, err
}

// receipt is the part of a job receipt the client follows.
type receipt struct {
	RequestID   string  `json:"request_id"`
	Status      string  `json:"status"`
	Operation   string  `json:"operation"`
	Credits     int64   `json:"credits"`
	AssetID     *string `json:"asset_id"`
	StatusURL   string  `json:"status_url"`
	ResultURL   string  `json:"result_url"`
	ErrorCode   *string `json:"error_code"`
	Accelerator *string `json:"accelerator"`
}

func (r receipt) final() bool {
	switch r.Status {
	case "succeeded", "failed", "canceled", "cancelled", "expired":
		return true
	}
	return false
}

// waitJob polls the job's status URL, pausing as the server's Retry-After says (at most pollMax), until it is
// final. It returns the last status and its JSON.
func (o *clientOpts) waitJob(ctx context.Context, r receipt) (receipt, []byte, error) {
	path := r.StatusURL
	if path == "" {
		path = "/watermarks/jobs/" + url.PathEscape(r.RequestID)
	}
	var cur receipt
	body, err := o.pollUntil(ctx, "job "+r.RequestID, path, func(body []byte) (bool, error) {
		cur = receipt{}
		if err := decodeAnswer(body, &cur); err != nil {
			return false, err
		}
		if !cur.final() && !o.quiet {
			fmt.Fprintf(o.stderr, "job %s: %s\n", cur.RequestID, cur.Status)
		}
		return cur.final(), nil
	})
	if err != nil {
		return receipt{}, nil, err
	}
	return cur, body, nil
}

// jobFailed turns a final, unsuccessful status into an error with its error code.
func jobFailed(r receipt, body []byte) error {
	code := "unknown"
	if r.ErrorCode != nil && *r.ErrorCode != "" {
		code = *r.ErrorCode
	}
	return &clientError{exit: exitJobFailed, msg: fmt.Sprintf("job %s %s: %s", r.RequestID, r.Status, code), body: body}
}

// outputName is the default output path of an embed: the input's name with "-watermarked" and the server's
// extension (from Content-Disposition), in the current directory.
func outputName(input string, hdr http.Header) string {
	base := strings.TrimSuffix(filepath.Base(input), filepath.Ext(input))
	ext := filepath.Ext(input)
	if _, params, err := mime.ParseMediaType(hdr.Get("Content-Disposition")); err == nil && params["filename"] != "" {
		if e := filepath.Ext(params["filename"]); e != "" {
			ext = e
		}
	}
	return base + "-watermarked" + ext
}

// saveMedia writes a 200 media answer to out (atomically: a temporary file renamed into place).
func saveMedia(resp *http.Response, out string) (int64, error) {
	dir := filepath.Dir(out)
	tmp, err := os.CreateTemp(dir, ".filigrane-*")
	if err != nil {
		return 0, usageErr("create output in %s: %v", dir, err)
	}
	n, err := io.Copy(tmp, resp.Body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return 0, &clientError{exit: exitNetwork, msg: fmt.Sprintf("download the watermarked file: %v", err)}
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		os.Remove(tmp.Name())
		return 0, usageErr("write %s: %v", out, err)
	}
	return n, nil
}

// embedResult is what `embed --json` prints for a synchronous (200) embed, whose body is the media itself.
type embedResult struct {
	RequestID     string `json:"request_id,omitempty"`
	WatermarkID   string `json:"watermark_id"`
	AssetID       string `json:"asset_id,omitempty"`
	SourceAssetID string `json:"source_asset_id,omitempty"`
	Accelerator   string `json:"accelerator,omitempty"`
	// StorageDeliveryID is the delivery to the storage destination the embed named (docs/storage.md).
	StorageDeliveryID string `json:"storage_delivery_id,omitempty"`
	Output            string `json:"output"`
	Bytes             int64  `json:"bytes"`
}

func printJSON(w io.Writer, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(w, string(b))
}

func printRaw(w io.Writer, body []byte) {
	w.Write(bytes.TrimSpace(body))
	fmt.Fprintln(w)
}

const embedUsage = `usage: filigrane embed FILE [flags]

Embeds a watermark through the server ($FILIGRANE_URL, key $FILIGRANE_API_KEY) and saves the watermarked
file (-o, default NAME-watermarked.EXT here). Files over the kind's direct limit, or with --upload, go through
a signed upload with a progress bar. --async returns the job receipt; --wait follows it to the end and
downloads the result. Exit codes: docs/cli.md.

flags:
`

func runEmbed(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := &clientOpts{stdout: stdout, stderr: stderr}
	return clientExit("embed", o, embedCmd(ctx, args, o))
}

func embedCmd(ctx context.Context, args []string, o *clientOpts) error {
	fs := flag.NewFlagSet("filigrane embed", flag.ContinueOnError)
	fs.SetOutput(o.stderr)
	fs.Usage = func() { fmt.Fprint(o.stderr, embedUsage); fs.PrintDefaults() }
	data := fs.String("data", "", `embed data, a JSON object (default: {"source":"<file name>"})`)
	async := fs.Bool("async", false, "use the asynchronous endpoint: print the job receipt (add --wait to follow it)")
	wait := fs.Bool("wait", false, "with --async, follow the job and download its result (a sync embed that became a job is always followed)")
	idem := fs.String("idempotency-key", "", "Idempotency-Key header (8 to 128 letters, digits, - or _)")
	out := fs.String("o", "", "output file (default: NAME-watermarked.EXT in the current directory)")
	media := registerMediaFlags(fs)
	webhook := fs.String("webhook-id", "", "webhook endpoint that receives the job's final event (async)")
	storageDst := fs.String("storage-destination-id", "", "also deliver the result to this verified storage destination (dst_..., docs/storage.md)")
	storageKey := fs.String("storage-key", "", "with --storage-destination-id: the object key under its prefix")
	outFormat := fs.String("output-format", "", "image embeds: png (default), jpeg (quality 95, 4:4:4) or webp (lossless); the saved file's default name takes its extension")
	pos, err := parseClientFlags(fs, o, args)
	if err != nil {
		return err
	}
	if *data != "" {
		var obj map[string]any
		if err := json.Unmarshal([]byte(*data), &obj); err != nil || obj == nil {
			return usageErr("--data must be a JSON object")
		}
	}
	ctx, cancel := o.deadline(ctx)
	defer cancel()
	in, err := media.prepare(ctx, o, pos, jobstate.OperationEmbed, "")
	if err != nil {
		return err
	}
	file, kind := in.file, in.kind
	if *data == "" {
		b, _ := json.Marshal(map[string]string{"source": filepath.Base(file)})
		*data = string(b)
	}
	accel := media.accel
	path := kind.RoutePrefix
	if *async {
		path += "/async"
	}
	q := url.Values{}
	if *accel != "" {
		q.Set("accelerator", *accel)
	}
	if *webhook != "" {
		q.Set("webhook_id", *webhook)
	}
	if *outFormat != "" {
		// The server checks the value (422 invalid_request), so that the client never disagrees with it.
		q.Set("output_format", *outFormat)
	}
	if *storageKey != "" && *storageDst == "" {
		return usageErr("--storage-key needs --storage-destination-id")
	}
	if *storageDst != "" {
		q.Set("storage_destination_id", *storageDst)
		if *storageKey != "" {
			q.Set("storage_key", *storageKey)
		}
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	resp, err := o.mediaRequest(ctx, path, file, in.uploadID, map[string]string{"data": *data}, *idem)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return o.saveEmbed(resp, file, *out, "")
	}
	// 202: a job receipt (async, or a sync embed past the server's wait).
	var r receipt
	body, _, err := readJSON(resp, &r)
	if err != nil {
		return err
	}
	// A synchronous embed the server turned into a job (past its 20 s wait) is followed: the user asked for
	// the file. --async prints the receipt unless --wait is given too.
	if *async && !*wait {
		o.printReceipt(r, body)
		return nil
	}
	return o.followAndDownload(ctx, r, file, *out)
}

// printReceipt prints a job receipt (the server's JSON with --json) and how to follow the job.
func (o *clientOpts) printReceipt(r receipt, body []byte) {
	if o.jsonOut {
		printRaw(o.stdout, body)
		return
	}
	fmt.Fprintf(o.stdout, "job %s %s (credits %d)\nfollow it: filigrane jobs get %s --wait\n", r.RequestID, r.Status, r.Credits, r.RequestID)
}

// followAndDownload waits for a job and saves an embed's file (out, else a name from input) or prints a
// detection's result.
func (o *clientOpts) followAndDownload(ctx context.Context, r receipt, input, out string) error {
	fin, body, err := o.waitJob(ctx, r)
	if err != nil {
		return err
	}
	if fin.Status != "succeeded" {
		return jobFailed(fin, body)
	}
	if fin.Operation != "" && fin.Operation != "embed" {
		// A detection job's result is JSON.
		res, _, err := o.getJSON(ctx, resultPath(fin), nil)
		if err != nil {
			return err
		}
		return o.printDetection(res)
	}
	resp, err := o.getFile(ctx, resultPath(fin))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return o.saveEmbed(resp, input, out, fin.RequestID)
}

func resultPath(r receipt) string {
	if r.ResultURL != "" {
		return r.ResultURL
	}
	return "/watermarks/jobs/" + url.PathEscape(r.RequestID) + "/result"
}

func (o *clientOpts) saveEmbed(resp *http.Response, input, out, requestID string) error {
	if out == "" {
		out = outputName(input, resp.Header)
	}
	n, err := saveMedia(resp, out)
	if err != nil {
		return err
	}
	res := embedResult{
		RequestID: requestID, WatermarkID: resp.Header.Get("X-Watermark-ID"), AssetID: resp.Header.Get("X-Asset-ID"),
		SourceAssetID: resp.Header.Get("X-Source-Asset-ID"), Accelerator: resp.Header.Get("X-Service-Accelerator"),
		StorageDeliveryID: resp.Header.Get("X-Storage-Delivery-ID"), Output: out, Bytes: n,
	}
	if res.RequestID == "" {
		res.RequestID = resp.Header.Get("X-Request-ID")
	}
	if o.jsonOut {
		printJSON(o.stdout, res)
		return nil
	}
	fmt.Fprintf(o.stdout, "watermark_id %s\n", res.WatermarkID)
	if res.AssetID != "" {
		fmt.Fprintf(o.stdout, "asset_id     %s\n", res.AssetID)
	}
	if res.StorageDeliveryID != "" {
		fmt.Fprintf(o.stdout, "delivery     %s (filigrane storage delivery %s)\n", res.StorageDeliveryID, res.StorageDeliveryID)
	}
	fmt.Fprintf(o.stdout, "output       %s (%d bytes)\n", out, n)
	return nil
}

const detectUsage = `usage: filigrane detect FILE [flags]

Detects a watermark through the server and prints the result (--json: the server's JSON). Files over the
kind's direct detect limit, or with --upload, go through a signed upload. A video detection becomes a job:
--wait (the default for detect) follows it. Exit codes: docs/cli.md.

flags:
`

// detectResult is the image/PDF detection body.
type detectResult struct {
	Watermarked bool    `json:"watermarked"`
	Confidence  float64 `json:"confidence"`
	WatermarkID *string `json:"watermark_id"`
}

func runDetect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := &clientOpts{stdout: stdout, stderr: stderr}
	return clientExit("detect", o, detectCmd(ctx, args, o))
}

func detectCmd(ctx context.Context, args []string, o *clientOpts) error {
	fs := flag.NewFlagSet("filigrane detect", flag.ContinueOnError)
	fs.SetOutput(o.stderr)
	fs.Usage = func() { fmt.Fprint(o.stderr, detectUsage); fs.PrintDefaults() }
	async := fs.Bool("async", false, "use the asynchronous endpoint")
	wait := fs.Bool("wait", true, "follow a detection job to its result")
	idem := fs.String("idempotency-key", "", "Idempotency-Key header")
	media := registerMediaFlags(fs)
	pos, err := parseClientFlags(fs, o, args)
	if err != nil {
		return err
	}
	ctx, cancel := o.deadline(ctx)
	defer cancel()
	in, err := media.prepare(ctx, o, pos, jobstate.OperationDetect, "detect")
	if err != nil {
		return err
	}
	file, kind, accel := in.file, in.kind, media.accel
	path := kind.RoutePrefix + "/detect"
	if *async {
		path += "/async"
	}
	if *accel != "" {
		path += "?accelerator=" + url.QueryEscape(*accel)
	}
	resp, err := o.mediaRequest(ctx, path, file, in.uploadID, nil, *idem)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		body, _, err := readJSON(resp, nil)
		if err != nil {
			return err
		}
		return o.printDetection(body)
	}
	var r receipt
	body, _, err := readJSON(resp, &r)
	if err != nil {
		return err
	}
	if !*wait {
		o.printReceipt(r, body)
		return nil
	}
	return o.followAndDownload(ctx, r, file, "")
}

func (o *clientOpts) printDetection(body []byte) error {
	if o.jsonOut {
		printRaw(o.stdout, body)
		return nil
	}
	var d detectResult
	if err := json.Unmarshal(body, &d); err != nil {
		// A result shape this client does not know (video): show it as it is.
		printRaw(o.stdout, body)
		return nil
	}
	id := "-"
	if d.WatermarkID != nil {
		id = *d.WatermarkID
	}
	fmt.Fprintf(o.stdout, "watermarked  %t\nconfidence   %.3f\nwatermark_id %s\n", d.Watermarked, d.Confidence, id)
	return nil
}

const jobsUsage = `usage: filigrane jobs get REQUEST_ID [--wait] [-o OUT] [flags]

Prints a job's status (--json: the server's JSON). --wait follows it until it is final and then downloads an
embed job's file (-o) or prints a detection job's result. Exit codes: docs/cli.md.

flags:
`

func runJobs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := &clientOpts{stdout: stdout, stderr: stderr}
	return clientExit("jobs", o, jobsCmd(ctx, args, o))
}

func jobsCmd(ctx context.Context, args []string, o *clientOpts) error {
	_, fs, err := subcommand(o, "jobs", jobsUsage, "want: jobs get REQUEST_ID", args, "get")
	if fs == nil {
		return err
	}
	wait := fs.Bool("wait", false, "follow the job until it is final, then download or print its result")
	out := fs.String("o", "", "with --wait, where an embed job's file goes (default: REQUEST_ID-watermarked.EXT)")
	pos, err := parseClientFlags(fs, o, args[1:])
	if err != nil {
		return err
	}
	id, err := oneArg(pos, "REQUEST_ID")
	if err != nil {
		return err
	}
	ctx, cancel := o.deadline(ctx)
	defer cancel()
	r := receipt{RequestID: id, StatusURL: "/watermarks/jobs/" + url.PathEscape(id)}
	if !*wait {
		var cur receipt
		body, _, err := o.getJSON(ctx, r.StatusURL, &cur)
		if err != nil {
			return err
		}
		if o.jsonOut {
			printRaw(o.stdout, body)
		} else {
			printStatus(o.stdout, cur)
		}
		return nil
	}
	return o.followAndDownload(ctx, r, id, *out)
}

func printStatus(w io.Writer, r receipt) {
	fmt.Fprintf(w, "request_id   %s\nstatus       %s\noperation    %s\ncredits      %d\n", r.RequestID, r.Status, r.Operation, r.Credits)
	if r.AssetID != nil {
		fmt.Fprintf(w, "asset_id     %s\n", *r.AssetID)
	}
	if r.ErrorCode != nil {
		fmt.Fprintf(w, "error_code   %s\n", *r.ErrorCode)
	}
}
