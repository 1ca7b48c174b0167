package loadbench

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"filigrane/bench/apibench"
)

// httpClient sends the harness's requests. fasthttp takes no context: every request is bounded by timeout, and
// callers check their context between requests.
type httpClient struct {
	c       *fasthttp.Client
	timeout time.Duration
}

func newHTTPClient(conns int, timeout time.Duration) *httpClient {
	c := apibench.NewClient("filigrane-bench-load", conns, timeout)
	// A request that found no free connection waits for one instead of failing at once: the open-loop
	// generator bounds what is in flight itself.
	c.MaxConnWaitTimeout = timeout
	return &httpClient{timeout: timeout, c: c}
}

// response is what the harness keeps of an answer.
type response struct {
	status      int
	contentType string
	requestID   string
	watermarkID string // X-Watermark-ID of a marked file
	body        []byte
}

// problemCode returns the problem code of an error answer, or "".
func (r *response) problemCode() string {
	var p struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(r.body, &p) == nil {
		return p.Code
	}
	return ""
}

// failureKey names a failed answer: its status and problem code ("503 service_unavailable").
func (r *response) failureKey() string {
	k := strconv.Itoa(r.status)
	if c := r.problemCode(); c != "" {
		k += " " + c
	}
	return k
}

// do sends one request. keepBody copies a 200's body out (the response is released on return).
func (h *httpClient) do(method, url, key, contentType string, body []byte, headers map[string]string, keepBody bool) (*response, error) {
	req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(res)
	req.SetRequestURI(url)
	req.Header.SetMethod(method)
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if body != nil {
		req.Header.SetContentType(contentType)
		// Bodies are shared by all operations and never written to, so no copy is needed.
		req.SetBodyRaw(body)
	}
	if err := h.c.DoTimeout(req, res, h.timeout); err != nil {
		return nil, err
	}
	r := &response{status: res.StatusCode(), contentType: string(res.Header.ContentType()),
		requestID: string(res.Header.Peek("X-Request-ID")), watermarkID: string(res.Header.Peek("X-Watermark-ID"))}
	// A 200's body (a marked image) is dropped unless asked for; any other answer is read (receipts, problems).
	if keepBody || r.status != 200 {
		r.body = append([]byte(nil), res.Body()...)
	}
	return r, nil
}

// getJSON GETs url and decodes a 2xx JSON answer into v.
func (h *httpClient) getJSON(url, key string, v any) (int, error) {
	r, err := h.do("GET", url, key, "", nil, nil, true)
	if err != nil {
		return 0, err
	}
	if r.status/100 == 2 {
		if err := json.Unmarshal(r.body, v); err != nil {
			return r.status, fmt.Errorf("GET %s: decode: %w", url, err)
		}
	}
	return r.status, nil
}

// transportKey names a request that got no answer.
func transportKey(err error) string { return "transport: " + apibench.TransportKind(err) }

// putKey names a signed-URL PUT's failure for the retry budget (again): its transport error, or "PUT" and its
// answer.
func putKey(res *response, err error) string {
	if err != nil {
		return transportKey(err)
	}
	return "PUT " + res.failureKey()
}
