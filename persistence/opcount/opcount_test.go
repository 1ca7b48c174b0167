package opcount_test

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"filigrane/persistence/opcount"
)

// TestOpAndPrefix: S3 requests are named as providers bill them (a GET that lists keys is a listing, the
// rest by method), and record calls count under their key's first segment.
func TestOpAndPrefix(t *testing.T) {
	for _, c := range []struct{ method, url, want string }{
		{"GET", "http://s3:9000/bucket/?list-type=2&prefix=records%2Fjobs%2Factive%2F", "list"},
		{"GET", "http://s3:9000/bucket/?location=", "get"},
		{"GET", "http://s3:9000/bucket/records/job/req_1", "get"},
		{"HEAD", "http://s3:9000/bucket/blobs/in/x", "head"},
		{"PUT", "http://s3:9000/bucket/records/org/org_1", "put"},
		{"POST", "http://s3:9000/bucket/blobs/x?uploads", "post"},
		{"DELETE", "http://s3:9000/bucket/blobs/x", "delete"},
	} {
		req, err := http.NewRequest(c.method, c.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := opcount.Op(req); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.method, c.url, got, c.want)
		}
	}
	for key, want := range map[string]string{"job/req_1": "job", "jobs/active/req_1": "jobs", "sweeper/lease": "sweeper", "k": "k", "": ""} {
		if got := opcount.Prefix([]byte(key)); got != want {
			t.Errorf("Prefix(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestTorn: torn objects show in filigrane_store_torn_objects_total by store and outcome; nil metrics count
// nothing and do not panic.
func TestTorn(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := opcount.NewMetrics(reg)
	m.Torn("records", true)
	m.Torn("records", true)
	var none *opcount.Metrics
	none.Torn("records", true)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "filigrane_store_torn_objects_total" {
			continue
		}
		ms := mf.GetMetric()
		if len(ms) != 1 || ms[0].GetCounter().GetValue() != 2 || len(ms[0].GetLabel()) != 2 ||
			ms[0].GetLabel()[0].GetValue() != "repaired" || ms[0].GetLabel()[1].GetValue() != "records" {
			t.Fatalf("filigrane_store_torn_objects_total = %v, want one series {outcome=repaired, store=records} at 2", ms)
		}
		return
	}
	t.Fatal("filigrane_store_torn_objects_total not registered")
}
