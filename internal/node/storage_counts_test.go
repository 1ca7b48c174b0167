package node_test

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"filigrane/internal/node"
	"filigrane/persistence"
	"filigrane/persistence/opcount"
	"filigrane/persistence/s3test"
)

// counter sums the series of metric name that carry every one of labels (name=value pairs).
func counter(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			has := map[string]bool{}
			for _, l := range m.GetLabel() {
				has[l.GetName()+"="+l.GetValue()] = true
			}
			match := true
			for _, l := range labels {
				match = match && has[l]
			}
			if match {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestStorageOperationsCounted: a node's storage opened on a real S3 server counts each record call by
// operation and every request the object store receives (a conditional record write is one PUT there, a blob
// written and read back at least one PUT and one GET), and in single-node mode counts the calls on Pebble; counting
// counts each call under its key's first segment, and changes no result (a create-only write of an existing key still fails with a version mismatch).
func TestStorageOperationsCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := s3test.Start(t)
	reg := prometheus.NewRegistry()
	m := opcount.NewMetrics(reg)
	st, err := node.OpenCountedStorage(ctx, t.TempDir(), &node.S3Config{Endpoint: "http://" + srv.Endpoint,
		Bucket: srv.NewBucket(t), AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Region: srv.Region}, zerolog.Nop(), m)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	puts := counter(t, reg, "filigrane_s3_requests_total", "op=put")
	gets := counter(t, reg, "filigrane_s3_requests_total", "op=get")
	if _, err := st.Store.CompareAndSet(ctx, []byte("job/k"), persistence.NoVersion, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if d := counter(t, reg, "filigrane_s3_requests_total", "op=put") - puts; d != 1 {
		t.Fatalf("%v S3 PUTs for one conditional record write", d)
	}
	puts = counter(t, reg, "filigrane_s3_requests_total", "op=put")
	gets = counter(t, reg, "filigrane_s3_requests_total", "op=get")
	if _, err := st.Store.CompareAndSet(ctx, []byte("job/k"), persistence.NoVersion, []byte("w")); !errors.Is(err, persistence.ErrVersionMismatch) {
		t.Fatalf("second create-only write: %v, want a version mismatch", err)
	}
	if it, err := st.Store.Get(ctx, []byte("job/k")); err != nil || string(it.Value) != "v" {
		t.Fatalf("get: %q %v", it.Value, err)
	}
	if got := counter(t, reg, "filigrane_store_operations_total", "store=records", "backend=s3", "op=compare_and_set", "prefix=job"); got != 2 {
		t.Fatalf("%v compare-and-sets counted, want 2", got)
	}
	if got := counter(t, reg, "filigrane_store_operations_total", "store=records", "backend=s3", "op=get"); got != 1 {
		t.Fatalf("%v gets counted, want 1", got)
	}
	puts = counter(t, reg, "filigrane_s3_requests_total", "op=put")
	gets = counter(t, reg, "filigrane_s3_requests_total", "op=get")
	if _, err := st.Blobs.Put(ctx, "a/b", strings.NewReader("hello")); err != nil {
		t.Fatal(err)
	}
	rc, err := st.Blobs.Get(ctx, "a/b", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(b) != "hello" {
		t.Fatalf("blob read back: %q %v", b, err)
	}
	if d := counter(t, reg, "filigrane_s3_requests_total", "op=put") - puts; d < 1 {
		t.Fatalf("%v S3 PUTs for a blob write", d)
	}
	if d := counter(t, reg, "filigrane_s3_requests_total", "op=get") - gets; d < 1 {
		t.Fatalf("%v S3 GETs for a blob read", d)
	}

	reg2 := prometheus.NewRegistry()
	single, err := node.OpenCountedStorage(ctx, t.TempDir(), nil, zerolog.Nop(), opcount.NewMetrics(reg2))
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	if _, err := single.Store.CompareAndSet(ctx, []byte("job/k"), persistence.NoVersion, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := single.Store.Scan(ctx, []byte("job/k"), nil, 10); err != nil {
		t.Fatal(err)
	}
	if got := counter(t, reg2, "filigrane_store_operations_total", "store=records", "backend=pebble", "op=compare_and_set"); got != 1 {
		t.Fatalf("%v Pebble writes counted, want 1", got)
	}
	if got := counter(t, reg2, "filigrane_store_operations_total", "store=records", "backend=pebble", "op=scan"); got != 1 {
		t.Fatalf("%v Pebble scans counted, want 1", got)
	}
}

// TestTornRecordLoggedAndCounted: on object storage that tears writes (versitygw with sidecar metadata killed
// inside a PUT), a node's record reads its last complete state, and the repair shows in the log (a warning
// naming the object) and in filigrane_store_torn_objects_total.
func TestTornRecordLoggedAndCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := s3test.StartSidecar(t)
	bucket := srv.NewBucket(t)
	reg := prometheus.NewRegistry()
	var logs strings.Builder
	st, err := node.OpenCountedStorage(ctx, t.TempDir(), &node.S3Config{Endpoint: "http://" + srv.Endpoint,
		Bucket: bucket, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Region: srv.Region},
		zerolog.New(&logs), opcount.NewMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Store.CompareAndSet(ctx, []byte("org/o"), persistence.NoVersion, []byte("balance")); err != nil {
		t.Fatal(err)
	}
	object := "records/" + hex.EncodeToString([]byte("org/o")) + "-"
	srv.TearETag(t, bucket, object, "0123456789abcdef0123456789abcdef")
	it, err := st.Store.Get(ctx, []byte("org/o"))
	if err != nil || string(it.Value) != "balance" {
		t.Fatalf("Get(torn record) = %q, %v; want its last complete state", it.Value, err)
	}
	if got := counter(t, reg, "filigrane_store_torn_objects_total", "store=records", "outcome=repaired"); got != 1 {
		t.Fatalf("%v repairs counted, want 1", got)
	}
	if l := logs.String(); !strings.Contains(l, `"component":"s3store"`) || !strings.Contains(l, "repaired a torn record") ||
		!strings.Contains(l, object) {
		t.Fatalf("log = %s; want a warning naming %s", l, object)
	}
}
