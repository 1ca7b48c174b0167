// Package opcount counts a node's storage operations, so that the cost of a job in storage requests (what an
// S3 provider bills, what Pebble writes) can be read from the node's metrics: Store wraps a persistence.Store
// and counts its calls by operation, Transport wraps the S3 client's HTTP transport and counts every request
// the object store receives (records, blobs, retries and multipart parts included) by operation.
//
// It only counts: it changes no argument, result or error, holds no state but the counters, and must not
// decide anything about storage.
package opcount

import (
	"bytes"
	"context"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"filigrane/persistence"
)

// Metrics holds the counters. A nil *Metrics counts nothing.
type Metrics struct {
	store *prometheus.CounterVec
	s3    *prometheus.CounterVec
	torn  *prometheus.CounterVec
}

// NewMetrics registers the storage counters in reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		store: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "filigrane_store_operations_total",
			Help: "Calls to a record store of this node, by store (records: the durable records; local: the node's own Pebble in cluster mode), backend (pebble, s3), operation (get, compare_and_set, delete, scan) and key prefix (the key's first segment: job, org, asset, ...)."},
			[]string{"store", "backend", "op", "prefix"}),
		s3: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "filigrane_s3_requests_total",
			Help: "HTTP requests this node sent to the object store (records and blobs, retries included), by operation (list, get, head, put, post, delete)."},
			[]string{"op"}),
		torn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "filigrane_store_torn_objects_total",
			Help: "Torn objects this node met in a record store, by store and outcome (repaired, or refused: a create failed until an operator acts): objects whose ETag the object storage kept without the body, as a crash of versitygw with sidecar metadata leaves them (docs/operations.md, Object storage). Any increase means the storage lost a half-done write."},
			[]string{"store", "outcome"}),
	}
	reg.MustRegister(m.store, m.s3, m.torn)
	return m
}

// Torn counts one torn object of store, repaired or refused (a no-op on nil).
func (m *Metrics) Torn(store string, repaired bool) {
	if m != nil {
		outcome := "refused"
		if repaired {
			outcome = "repaired"
		}
		m.torn.WithLabelValues(store, outcome).Inc()
	}
}

// Store wraps inner so that each call counts under store and backend; with m nil it returns inner.
func Store(inner persistence.Store, m *Metrics, store, backend string) persistence.Store {
	if m == nil {
		return inner
	}
	return &counted{Store: inner, m: m.store.MustCurryWith(prometheus.Labels{"store": store, "backend": backend})}
}

type counted struct {
	persistence.Store
	m *prometheus.CounterVec // curried with store and backend: op, prefix remain
}

// Prefix is the label a key counts under: its first segment ("job" for job/req_...), the record kind. Keys
// are the fixed words of docs/ARCHITECTURE.md's Storage keys table, so the label set stays small.
func Prefix(key []byte) string {
	if i := bytes.IndexByte(key, '/'); i >= 0 {
		key = key[:i]
	}
	return string(key)
}

func (s *counted) Get(ctx context.Context, key []byte) (persistence.Item, error) {
	s.m.WithLabelValues("get", Prefix(key)).Inc()
	return s.Store.Get(ctx, key)
}

func (s *counted) CompareAndSet(ctx context.Context, key []byte, expect persistence.Version, value []byte) (persistence.Version, error) {
	s.m.WithLabelValues("compare_and_set", Prefix(key)).Inc()
	return s.Store.CompareAndSet(ctx, key, expect, value)
}

func (s *counted) Delete(ctx context.Context, key []byte, expect persistence.Version) error {
	s.m.WithLabelValues("delete", Prefix(key)).Inc()
	return s.Store.Delete(ctx, key, expect)
}

func (s *counted) Scan(ctx context.Context, prefix, start []byte, limit int) ([]persistence.Item, error) {
	s.m.WithLabelValues("scan", Prefix(prefix)).Inc()
	return s.Store.Scan(ctx, prefix, start, limit)
}

// Transport wraps inner (http.DefaultTransport when nil) so that every request counts; with m nil it returns
// inner.
func Transport(inner http.RoundTripper, m *Metrics) http.RoundTripper {
	if inner == nil {
		inner = http.DefaultTransport
	}
	if m == nil {
		return inner
	}
	return &transport{inner: inner, m: m}
}

type transport struct {
	inner http.RoundTripper
	m     *Metrics
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.m.s3.WithLabelValues(Op(req)).Inc()
	return t.inner.RoundTrip(req)
}

// Op names an S3 request as providers bill it: "list" (a GET listing keys), else its method in lower case
// ("get", "head", "put", "post", "delete"). Listings, PUTs and POSTs cost about ten times a GET or HEAD;
// DELETEs are usually free.
func Op(req *http.Request) string {
	q := req.URL.Query()
	if req.Method == http.MethodGet && (q.Has("list-type") || q.Has("prefix") || q.Has("delimiter") || q.Has("uploads")) {
		return "list"
	}
	return strings.ToLower(req.Method)
}
