package http

import (
	"bytes"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/valyala/fasthttp"

	"filigrane/http/console"
	"filigrane/internal/netguard"
)

// Metrics are the node's Prometheus collectors. Each node has its own registry (no global state), served at
// /metrics in the Prometheus text format.
type Metrics struct {
	Registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// Actors counts active actor activations on this node by kind.
	Actors *prometheus.GaugeVec
	// authRefused counts API requests refused by authentication, by authRefusal reason.
	authRefused *prometheus.CounterVec
	// consoleRefused counts console requests refused for their session cookie (or invitation link), by
	// console.RefusalReasons.
	consoleRefused *prometheus.CounterVec
}

// Reasons of filigrane_auth_refused_total: a fixed set, so the label is bounded whatever clients send.
const (
	authMissing      = "missing_key"     // 401: no X-API-Key
	authInvalid      = "invalid_key"     // 401: malformed, unknown, wrong secret, revoked or expired
	authAddressSpent = "address_limited" // 429: the client address's failed lookups are used up
	authInFlightFull = "lookups_busy"    // 503: too many lookups of unknown keys under way
	authStoreError   = "store_error"     // 503: the store did not answer the lookup
)

// NewMetrics builds the collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "filigrane_http_requests_total", Help: "HTTP requests by route pattern, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "filigrane_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern and status class: 2xx, 3xx, 429, 4xx (other), 503, 5xx (other), other.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 60},
		}, []string{"route", "status_class"}),
		Actors: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "filigrane_actors_active", Help: "Active actor activations on this node by kind.",
		}, []string{"kind"}),
		authRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "filigrane_auth_refused_total",
			Help: "API requests refused by API-key authentication, by reason: missing_key and invalid_key (401), address_limited (429: too many unknown keys from the client's address), lookups_busy (503: too many lookups of unknown keys under way), store_error (503).",
		}, []string{"reason"}),
		consoleRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "filigrane_console_session_refused_total",
			Help: "Console requests refused for their session cookie, by reason: invalid_session (no live session: the sign-in page or 401), address_limited (429: too many unknown sessions or invitation links from the client's address), lookups_busy (503: too many lookups of unknown credentials under way), store_error (503).",
		}, []string{"reason"}),
	}
	for _, r := range []string{authMissing, authInvalid, authAddressSpent, authInFlightFull, authStoreError} {
		m.authRefused.WithLabelValues(r) // present at 0 from the start, so that rate() sees the first refusal
	}
	for _, r := range console.RefusalReasons() {
		m.consoleRefused.WithLabelValues(r)
	}
	m.Registry.MustRegister(m.requests, m.latency, m.Actors, m.authRefused, m.consoleRefused,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// ActorDelta adjusts the active-actor gauge; actors call it on start and stop.
func (m *Metrics) ActorDelta(kind string, delta int) {
	m.Actors.WithLabelValues(kind).Add(float64(delta))
}

func (m *Metrics) observe(route, method string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, methodLabel(method), strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(route, statusClass(status)).Observe(d.Seconds())
}

// statusClass is the status label of the latency histogram: the class of the status, with the two refusals a
// loaded node answers in a millisecond apart (429: a limit; 503: unavailable, draining or over the connection
// limit), so that the latency of successes is read without them. Seven values at most: each label value
// multiplies the histogram's series (16 buckets a route).
func statusClass(status int) string {
	switch {
	case status == 429:
		return "429"
	case status == 503:
		return "503"
	case status >= 200 && status < 300:
		return "2xx"
	case status >= 300 && status < 400:
		return "3xx"
	case status >= 400 && status < 500:
		return "4xx"
	case status >= 500 && status < 600:
		return "5xx"
	}
	return "other"
}

// methodLabel is the method label of a request: one of the methods HTTP defines, else "other". A client
// chooses the method token freely (fasthttp accepts any, up to the header limit), and each distinct label
// value is a series the registry keeps for the life of the process: taken as sent, requests with made-up
// methods, which need no key, grew the node's memory and /metrics without bound.
func methodLabel(method string) string {
	switch method {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE":
		return method
	case "":
		return ""
	}
	return "other"
}

func (m *Metrics) serve(ctx *fasthttp.RequestCtx) {
	families, err := m.Registry.Gather()
	if err != nil {
		writeProblem(ctx, CodeInternal, "could not gather metrics")
		return
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			writeProblem(ctx, CodeInternal, "could not encode metrics")
			return
		}
	}
	ctx.SetContentType(string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	ctx.SetBody(buf.Bytes())
}

// watchListener exports a guarded listener's open and refused connections and its waited-out accept errors,
// labelled with the listener's name. A second listener of the same name keeps the first one's series.
func (m *Metrics) watchListener(name string, g *netguard.Listener) {
	labels := prometheus.Labels{"listener": name}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "filigrane_connections_open", ConstLabels: labels,
			Help: "Open connections of the listener."}, func() float64 { return float64(g.Open()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "filigrane_connections_refused_total", ConstLabels: labels,
			Help: "Connections answered 503 and closed for being over the per-listener or per-IP limit."},
			func() float64 { return float64(g.Refused.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "filigrane_accept_errors_total", ConstLabels: labels,
			Help: "Temporary accept errors (such as running out of file descriptors) waited out."},
			func() float64 { return float64(g.Errors.Load()) }),
	} {
		_ = m.Registry.Register(c) // AlreadyRegistered: keep the first listener's series
	}
}
