package node_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"filigrane/actors/batchstate"
	"filigrane/internal/node"
	"filigrane/persistence/s3test"
)

// verifiedDestination creates and verifies a destination on the S3 server (a fresh bucket) and returns its
// id and bucket.
func verifiedDestination(t *testing.T, base, key string, srv *s3test.Server, endpoint, prefix string) (string, string) {
	t.Helper()
	bucket := srv.NewBucket(t)
	r, dst := jsonObject(t, "POST", base+"/storage/destinations", key, map[string]any{
		"name": "results", "endpoint": endpoint, "region": srv.Region, "bucket": bucket, "prefix": prefix,
		"path_style": true, "access_key_id": srv.AccessKey, "secret_access_key": srv.SecretKey})
	if r.status != 201 {
		t.Fatalf("create destination: %d %s", r.status, r.body)
	}
	id := dst["id"].(string)
	if r = call(t, "POST", base+"/storage/destinations/"+id+"/verify", key, nil); r.status != 200 {
		t.Fatalf("verify: %d %s", r.status, r.body)
	}
	return id, bucket
}

// readBucketObject reads one object of the customer bucket.
func readBucketObject(t *testing.T, srv *s3test.Server, bucket, key string) []byte {
	t.Helper()
	obj, err := srv.Client().GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("read %s/%s: %v", bucket, key, err)
	}
	return b
}

// TestBatchDeliversToStorageDestination: a zip batch naming a verified destination delivers every item's
// result into the customer bucket (one object per item under <prefix>/<request id>/<file name>, the same
// bytes as the item's result), through each job's storage delivery; archive with a destination and an
// unverified destination are refused before a batch exists.
func TestBatchDeliversToStorageDestination(t *testing.T) {
	srv := s3test.Start(t)
	f := newBatchFixture(t, "scale", 100, func(c *node.Config) { c.AllowPrivateTargets = true })
	ctx := context.Background()
	id, bucket := verifiedDestination(t, f.base, f.key, srv, srv.Endpoint, "batches")

	files := map[string][]byte{"one.jpg": photo(t, 300, 300, 21), "dir/two.jpg": photo(t, 280, 300, 22), "three.jpg": photo(t, 260, 300, 23)}
	order := []string{"one.jpg", "dir/two.jpg", "three.jpg"}
	z := zipOf(t, files, order)
	items := `[{"filename":"one.jpg","data":{"n":1}},{"filename":"dir/two.jpg","data":{"n":2}},{"filename":"three.jpg","data":{"n":3}}]`

	// archive + destination: refused whole (spec 4.4), nothing created.
	r := postZip(t, f, "store-batch-0", z, `{"archive":true,"storage_destination_id":"`+id+`","items":`+items+`}`)
	if p := decodeProblem(t, r); r.status != 422 || p.Code != "invalid_request" || !strings.Contains(p.Detail, "storage_destination_id") {
		t.Fatalf("archive with a destination: %d %s", r.status, r.body)
	}
	// A destination that is not verified (here: another organization's id shape, unknown) is refused.
	r = sendBatch(t, "POST", f.base+"/watermarks/batches", f.key, "store-batch-1",
		`{"storage_destination_id":"dst_00000000000000000000000000000000","items":[`+itemsJSON([]string{"a.jpg"}, []int{100})+`]}`)
	if p := decodeProblem(t, r); r.status != 422 || p.Code != "storage_destination_unusable" {
		t.Fatalf("unknown destination: %d %s", r.status, r.body)
	}
	if r = sendBatch(t, "GET", f.base+"/watermarks/batches/"+batchstate.BatchIDFor(f.org, "store-batch-1"), f.key, "", ""); r.status != 404 {
		t.Fatalf("a refused batch exists: %d %s", r.status, r.body)
	}

	r = postZip(t, f, "store-batch-2", z, `{"storage_destination_id":"`+id+`","items":`+items+`}`)
	if r.status != 202 {
		t.Fatalf("zip batch with a destination: %d %s", r.status, r.body)
	}
	b := decodeBatch(t, r)
	done := waitBatch(t, f, b.BatchID, "completed", "failed")
	if done.Status != "completed" || done.Counts["succeeded"] != 3 {
		t.Fatalf("batch ended %s %v: %+v", done.Status, done.Counts, done.Items)
	}
	r, raw := jsonObject(t, "GET", f.base+"/watermarks/batches/"+b.BatchID, f.key, nil)
	if raw["storage_destination_id"] != id {
		t.Fatalf("batch storage_destination_id: %s", r.body)
	}
	rawItems, _ := raw["items"].([]any)
	for i, it := range done.Items {
		reqID := *it.RequestID
		waitEffect(t, f.n, reqID)
		delivery, _ := rawItems[i].(map[string]any)["storage_delivery_id"].(string)
		if !strings.HasPrefix(delivery, "std_") {
			t.Fatalf("item %d has no storage_delivery_id: %s", i, r.body)
		}
	}
	if _, _, err := f.n.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for i, it := range done.Items {
		reqID := *it.RequestID
		delivery := rawItems[i].(map[string]any)["storage_delivery_id"].(string)
		r, del := jsonObject(t, "GET", f.base+"/storage/deliveries/"+delivery, f.key, nil)
		wantKey, _ := del["key"].(string)
		if r.status != 200 || del["status"] != "stored" || !strings.HasPrefix(wantKey, "batches/"+reqID+"/") || del["destination_id"] != id {
			t.Fatalf("item %d delivery: %d %s (want a key under batches/%s/)", i, r.status, r.body, reqID)
		}
		res := call(t, "GET", f.base+"/watermarks/jobs/"+reqID+"/result", f.key, nil)
		if res.status != 200 {
			t.Fatalf("item %d result: %d %s", i, res.status, res.body)
		}
		if !bytes.Equal(readBucketObject(t, srv, bucket, wantKey), res.body) {
			t.Fatalf("item %d: the object in the bucket differs from the item's result", i)
		}
	}
}
