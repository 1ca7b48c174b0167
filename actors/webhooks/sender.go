package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"filigrane/internal/egress"
	"filigrane/internal/whsign"
)

// Delivery limits (issue 16): one attempt waits at most its sender's timeout (AttemptTimeout unless the
// operator sets another) for the receiver (connect, request, response and body), reads at most
// MaxResponseBody bytes of its answer and never follows a redirect.
const (
	AttemptTimeout  = 10 * time.Second
	MaxResponseBody = 64 << 10
	userAgent       = "Filigrane-Webhooks/1"
)

// Sender posts signed events. Build it with NewSender; it is safe for concurrent use.
type Sender struct {
	client  *http.Client
	timeout time.Duration
}

// NewSender returns a sender whose every connection goes through guard: the target is resolved and checked
// at each attempt, and the connection is made to the checked address. Connections are not kept between
// attempts, so a later attempt never rides on an earlier check. timeout bounds each attempt; 0 or less means
// AttemptTimeout.
func NewSender(guard *egress.Guard, timeout time.Duration) *Sender {
	if timeout <= 0 {
		timeout = AttemptTimeout
	}
	tr := &http.Transport{
		Proxy:                  nil, // a proxy would make the connection, past the guard
		DialContext:            guard.DialContext,
		DisableKeepAlives:      true,
		TLSHandshakeTimeout:    timeout,
		ResponseHeaderTimeout:  timeout,
		MaxResponseHeaderBytes: 16 << 10,
	}
	return &Sender{timeout: timeout, client: &http.Client{
		Transport: tr,
		Timeout:   timeout,
		// A redirect is an answer like any other non-2xx: it is not followed (the target could be anywhere).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Timeout is the longest one attempt waits for the receiver.
func (s *Sender) Timeout() time.Duration { return s.timeout }

// Attempt is the outcome of one POST.
type Attempt struct {
	StatusCode int // 0 when no answer came
	Duration   time.Duration
	// Filtered: nothing was sent, the endpoint's event filter leaves this event type out.
	Filtered bool
}

// ErrStatus is wrapped by the error of an attempt that got an answer other than 2xx.
var ErrStatus = errors.New("webhooks: receiver answered non-2xx")

// Post sends body (event id) to url, signed with secrets at now. nil error means a 2xx answer.
func (s *Sender) Post(ctx context.Context, url string, secrets []string, eventID, requestID string, body []byte, now time.Time) (Attempt, error) {
	headers, err := whsign.Sign(secrets, eventID, now, body)
	if err != nil {
		return Attempt{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Attempt{}, fmt.Errorf("webhooks: request to %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if requestID != "" {
		req.Header.Set("X-Request-ID", requestID)
	}
	for _, h := range headers {
		req.Header[h.Name] = []string{h.Value} // as written: Standard Webhooks names are lower case
	}
	started := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		return Attempt{Duration: time.Since(started)}, fmt.Errorf("webhooks: post to %s: %w", url, err)
	}
	// Read a bounded part of the answer so the receiver can finish writing; it is not kept.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResponseBody))
	_ = resp.Body.Close()
	att := Attempt{StatusCode: resp.StatusCode, Duration: time.Since(started)}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return att, nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return att, fmt.Errorf("%w: HTTP %d (redirects are not followed)", ErrStatus, resp.StatusCode)
	}
	return att, fmt.Errorf("%w: HTTP %d", ErrStatus, resp.StatusCode)
}
