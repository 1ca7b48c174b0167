package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"filigrane/actors"
	"filigrane/actors/batchstate"
	"filigrane/actors/jobstate"
	"filigrane/actors/outbox"
	"filigrane/actors/storagedest"
	"filigrane/internal/admin"
	"filigrane/internal/clock"
	"filigrane/internal/node"
	"filigrane/internal/recordtest"
	"filigrane/persistence/s3test"
)

// verifiedDestination creates and verifies a destination on the S3 server (a fresh bucket) and returns its
// id and bucket.
func verifiedDestination(t *testing.T, base, key string, srv *s3test.Server, endpoint, prefix string) (string, string) {
	t.Helper()
	bucket := srv.NewBucket(t)
	r, dst := jsonObject(t, "POST", base+"/storage/destinations", key, map[string]any{
		"name": "results", "endpoint": endpoint, "secure": false, "region": srv.Region, "bucket": bucket, "prefix": prefix,
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
	b, err := readObject(srv, bucket, key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readObject reads bucket/key whole; a missing key's error is minio's NoSuchKey response.
func readObject(srv *s3test.Server, bucket, key string) ([]byte, error) {
	obj, err := srv.Client().GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", bucket, key, err)
	}
	return b, nil
}

// TestBatchDeliversToStorageDestination: a zip batch naming a verified destination delivers every item's
// result into the customer bucket (one object per item under <prefix>/<request id>/<file name>, the same
// bytes as the item's result), through each job's storage delivery; archive with a destination and an
// unverified destination are refused before a batch exists.
func TestBatchDeliversToStorageDestination(t *testing.T) {
	t.Parallel()
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

// storageEvents are the storage.delivery.* events the receiver got, decoded.
func storageEvents(t *testing.T, rc *hookReceiver) []map[string]any {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []map[string]any
	for _, b := range rc.bodies {
		var ev map[string]any
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatalf("event body %s: %v", b, err)
		}
		if typ, _ := ev["type"].(string); strings.HasPrefix(typ, "storage.delivery.") {
			out = append(out, ev)
		}
	}
	return out
}

// TestStorageFieldsEventsAndLateRetry: an async embed names a destination whose endpoint is down and a
// webhook. The asset and the receipt show the storage fields (queued, then retrying with the reason); a
// retry more than a day later, after the endpoint came back, still finds the output staged and stores it
// (the owner's "retry now"); the asset then shows stored with key and ETag, and the webhook got exactly one
// storage.delivery.succeeded. A second result under the same key fails for good with
// storage.delivery.failed, error_code object_key_conflict.
func TestStorageFieldsEventsAndLateRetry(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	ep := newSwitchable(t, srv.Endpoint)
	f := newFixture(t, func(c *node.Config) { c.AllowPrivateTargets = true })
	ctx := context.Background()
	rc := &hookReceiver{stop: make(chan struct{})}
	hook := httptest.NewServer(rc)
	defer hook.Close()
	defer close(rc.stop)
	r, wh := jsonObject(t, "POST", f.base+"/webhooks", f.keyA, map[string]any{"url": hook.URL + "/hook"})
	if r.status != 201 {
		t.Fatalf("create webhook: %d %s", r.status, r.body)
	}
	dst, bucket := verifiedDestination(t, f.base, f.keyA, srv, ep.addr, "")
	sweep := func() {
		t.Helper()
		if _, _, err := f.n.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}

	ep.down()
	q := "?webhook_id=" + wh["id"].(string) + "&storage_destination_id=" + dst + "&storage_key=late/one.jpg"
	r = post(t, f.base+"/watermarks/images/async"+q, f.keyA, "", photo(t, 400, 300, 31), `{"late":1}`)
	if r.status != 202 {
		t.Fatalf("async embed: %d %s", r.status, r.body)
	}
	rc0 := decodeReceipt(t, r)
	result := waitResult(t, f, f.keyA, rc0.ResultURL)
	if result.status != 200 {
		t.Fatalf("result: %d %s", result.status, result.body)
	}
	delivery := result.header.Get("X-Storage-Delivery-ID")
	_, job := jsonObject(t, "GET", f.base+rc0.StatusURL, f.keyA, nil)
	assetID, _ := job["asset_id"].(string)
	if job["storage_status"] != "queued" || job["storage_delivery_id"] != delivery || job["storage_provider"] != "s3" {
		t.Fatalf("receipt before the first attempt: %v", job)
	}
	r, as := jsonObject(t, "GET", f.base+"/assets/"+assetID, f.keyA, nil)
	created, _ := time.Parse(time.RFC3339, as["created_at"].(string))
	if as["storage_status"] != "queued" || as["storage_delivery_id"] != delivery || as["storage_destination_id"] != dst ||
		as["storage_provider"] != "s3" || as["staging_expires_at"] != created.Add(30*24*time.Hour).Format(time.RFC3339) ||
		as["file_expires_at"] == nil || as["staging_deleted_at"] != nil {
		t.Fatalf("asset before the first attempt: %s", r.body)
	}
	if _, src := jsonObject(t, "GET", f.base+"/assets/"+as["parent_asset_id"].(string), f.keyA, nil); src["storage_status"] != nil {
		t.Fatalf("the source asset shows storage fields: %v", src)
	}

	waitEffect(t, f.n, rc0.RequestID)
	sweep()
	r, as = jsonObject(t, "GET", f.base+"/assets/"+assetID, f.keyA, nil)
	if as["storage_status"] != "retrying" || !strings.HasPrefix(as["storage_error"].(string), "connect:") {
		t.Fatalf("asset while the endpoint is down: %s", r.body)
	}
	if _, job = jsonObject(t, "GET", f.base+rc0.StatusURL, f.keyA, nil); job["storage_status"] != "retrying" {
		t.Fatalf("receipt while retrying: %v", job)
	}
	_, del := jsonObject(t, "GET", f.base+"/storage/deliveries/"+delivery, f.keyA, nil)
	if del["error_code"] != "storage_unreachable" {
		t.Fatalf("delivery while down: %v", del)
	}

	f.clk.Advance(25 * time.Hour) // past the 24 h result retention: the staged output must still be there
	sweep()
	if _, del = jsonObject(t, "GET", f.base+"/storage/deliveries/"+delivery, f.keyA, nil); del["status"] != "retrying" || del["attempts"] != 2.0 {
		t.Fatalf("second attempt, still down: %v", del)
	}
	if len(storageEvents(t, rc)) != 0 {
		t.Fatal("a retrying delivery sent a storage event")
	}
	ep.up()
	if r = call(t, "POST", f.base+"/storage/deliveries/"+delivery+"/retry", f.keyA, nil); r.status != 202 {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	sweep()
	sweep() // the event handed over by the delivery goes out on this pass at the latest
	r, as = jsonObject(t, "GET", f.base+"/assets/"+assetID, f.keyA, nil)
	if as["storage_status"] != "stored" || as["storage_key"] != "late/one.jpg" || as["storage_etag"] == nil ||
		as["storage_delivered_at"] == nil || as["staging_expires_at"] != nil || as["storage_error"] != nil ||
		as["file_expires_at"] != nil || as["staging_deleted_at"] != f.clk.Now().UTC().Format(time.RFC3339) || as["file_available"] != true {
		t.Fatalf("asset once stored: %s", r.body)
	}
	// The hosted copy is gone; the asset's download reads the bucket.
	if c := call(t, "GET", f.base+"/assets/"+assetID+"/content", f.keyA, nil); c.status != 200 || !bytes.Equal(c.body, result.body) || c.header.Get("Accept-Ranges") != "none" {
		t.Fatalf("content of a stored asset: %d %v", c.status, c.header)
	}
	if _, job = jsonObject(t, "GET", f.base+rc0.StatusURL, f.keyA, nil); job["storage_status"] != "stored" {
		t.Fatalf("receipt once stored: %v", job)
	}
	if !bytes.Equal(readBucketObject(t, srv, bucket, "late/one.jpg"), result.body) {
		t.Fatal("the stored object differs from the result")
	}
	evs := storageEvents(t, rc)
	if len(evs) != 1 || evs[0]["type"] != "storage.delivery.succeeded" {
		t.Fatalf("storage events: %v", evs)
	}
	data, _ := evs[0]["data"].(map[string]any)
	if data["delivery_id"] != delivery || data["status"] != "stored" || data["asset_id"] != assetID ||
		data["uri"] != "s3://"+bucket+"/late/one.jpg" || data["error_code"] != nil || data["destination_id"] != dst {
		t.Fatalf("succeeded event data: %v", data)
	}
	// The event is in the endpoint's delivery log like every other event.
	r, log := jsonObject(t, "GET", f.base+"/webhooks/"+wh["id"].(string)+"/deliveries", f.keyA, nil)
	logged := false
	for _, e := range log["data"].([]any) {
		if p, _ := e.(map[string]any)["payload"].(map[string]any); p["type"] == "storage.delivery.succeeded" && p["id"] == evs[0]["id"] {
			logged = true
		}
	}
	if r.status != 200 || !logged {
		t.Fatalf("the storage event is not in the delivery log: %d %s", r.status, r.body)
	}

	// The same key again: never overwritten, failed for good, one failed event with its code.
	r = post(t, f.base+"/watermarks/images/async"+q, f.keyA, "", photo(t, 400, 300, 32), `{"late":2}`)
	if r.status != 202 {
		t.Fatalf("second async embed: %d %s", r.status, r.body)
	}
	rc1 := decodeReceipt(t, r)
	if res := waitResult(t, f, f.keyA, rc1.ResultURL); res.status != 200 {
		t.Fatalf("second result: %d", res.status)
	}
	waitEffect(t, f.n, rc1.RequestID)
	sweep()
	sweep()
	evs = storageEvents(t, rc)
	if len(evs) != 2 || evs[1]["type"] != "storage.delivery.failed" {
		t.Fatalf("storage events after a key conflict: %v", evs)
	}
	if data, _ = evs[1]["data"].(map[string]any); data["status"] != "failed" || data["error_code"] != "object_key_conflict" {
		t.Fatalf("failed event data: %v", data)
	}
	if !bytes.Equal(readBucketObject(t, srv, bucket, "late/one.jpg"), result.body) {
		t.Fatal("the first object was overwritten")
	}
	// A failed delivery keeps the hosted copy.
	_, job = jsonObject(t, "GET", f.base+rc1.StatusURL, f.keyA, nil)
	if r, as = jsonObject(t, "GET", f.base+"/assets/"+job["asset_id"].(string), f.keyA, nil); as["storage_status"] != "failed" ||
		as["file_expires_at"] == nil || as["staging_deleted_at"] != nil {
		t.Fatalf("asset of a failed delivery: %s", r.body)
	}
}

// storageOrg is a node with one organization and three keys: an owner's, a plain member's (every scope),
// and an owner's with only storage:read.
type storageOrg struct {
	n                     *node.Node
	base                  string
	clk                   *clock.Manual
	owner, member, reader string
}

func newStorageOrg(t *testing.T) *storageOrg {
	t.Helper()
	dir := t.TempDir()
	o := &storageOrg{clk: clock.NewManual(time.Date(2026, 5, 4, 10, 0, 30, 0, time.UTC))}
	offline(t, dir, o.clk, func(a admin.Admin) {
		ctx := context.Background()
		st, err := a.CreateOrg(ctx, "Storer", "scale", 100)
		if err != nil {
			t.Fatal(err)
		}
		key := func(name string, role actors.Role, scopes []string) string {
			m, err := a.AddMember(ctx, st.ID, name, role)
			if err != nil {
				t.Fatal(err)
			}
			k, _, err := a.CreateKey(ctx, actors.NewKeySpec{OrgID: st.ID, MemberID: m, Scopes: scopes})
			if err != nil {
				t.Fatal(err)
			}
			return k
		}
		o.owner = key("owner", actors.RoleOwner, actors.AllScopes())
		o.member = key("member", actors.RoleMember, actors.AllScopes())
		o.reader = key("reader", actors.RoleOwner, []string{actors.ScopeStorageRead})
	})
	o.n = startNode(t, dir, o.clk, inMemory(t), func(c *node.Config) { c.AllowPrivateTargets = true })
	t.Cleanup(func() { stopNode(t, o.n) })
	o.base = "http://" + o.n.APIAddr()
	return o
}

// TestStorageManagementHTTP: PATCH, DELETE, verify and retry through HTTP with their statuses and bodies
// (roles, scopes, unknown ids, bad bodies, hidden characters in fields and in a storage_key, a destination named
// before that rule, the 10-destination limit), and a destination's delivery list paged
// newest first with a delivery-id cursor; a delivery to a destination deleted before its first attempt fails
// with storage_destination_not_found.
func TestStorageManagementHTTP(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	o := newStorageOrg(t)
	ctx := context.Background()
	bucket := srv.NewBucket(t)
	create := map[string]any{"name": "mine", "endpoint": srv.Endpoint, "secure": false, "region": srv.Region, "bucket": bucket,
		"path_style": true, "access_key_id": srv.AccessKey, "secret_access_key": "not-the-secret"}

	wantProblem(t, "create by a member", jsonCall(t, "POST", o.base+"/storage/destinations", o.member, create), 403, "role_forbidden")
	// A body without keys is refused naming the fields the API takes (it said access_key and secret_key).
	if p := decodeProblem(t, jsonCall(t, "POST", o.base+"/storage/destinations", o.owner, map[string]any{"name": "keyless",
		"endpoint": srv.Endpoint, "bucket": bucket})); p.Status != 422 || !strings.Contains(p.Detail, "access_key_id and secret_access_key (or credentials) are required") {
		t.Fatalf("create without keys: %+v; want 422 naming access_key_id, secret_access_key and credentials", p)
	}
	wantProblem(t, "create with storage:read only", jsonCall(t, "POST", o.base+"/storage/destinations", o.reader, create), 403, "insufficient_scope")
	r, dst := jsonObject(t, "POST", o.base+"/storage/destinations", o.owner, create)
	if r.status != 201 || r.header.Get("Location") != "/storage/destinations/"+dst["id"].(string) {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	id := dst["id"].(string)
	url := o.base + "/storage/destinations/" + id

	// Verify with a wrong secret: 422 naming the step and the credentials, kept as last_error.
	r = call(t, "POST", url+"/verify", o.owner, nil)
	if p := decodeProblem(t, r); r.status != 422 || p.Code != "storage_verification_failed" || !strings.HasPrefix(p.Detail, "write:") ||
		!strings.Contains(p.Detail, "credentials") || !strings.Contains(p.Detail, "check access_key_id and secret_access_key") {
		t.Fatalf("verify with a wrong secret: %d %s; want the step and the fields to check, named as the API names them", r.status, r.body)
	}
	if _, got := jsonObject(t, "GET", url, o.reader, nil); got["verified_at"] != nil || !strings.Contains(got["last_error"].(string), "credentials") {
		t.Fatalf("after a failed verify: %v", got)
	}
	wantProblem(t, "verify by a member", call(t, "POST", url+"/verify", o.member, nil), 403, "role_forbidden")

	// PATCH: bad bodies, a member, an unknown id; then the right secret, verify, a rename keeps the
	// verification and a new prefix clears it.
	wantProblem(t, "patch with an unknown field", jsonCall(t, "PATCH", url, o.owner, map[string]any{"colour": "red"}), 422, "invalid_request")
	wantProblem(t, "patch with another provider", jsonCall(t, "PATCH", url, o.owner, map[string]any{"provider": "gcs"}), 422, "invalid_request")
	wantProblem(t, "patch an invalid bucket", jsonCall(t, "PATCH", url, o.owner, map[string]any{"bucket": "a/b"}), 422, "invalid_request")
	wantProblem(t, "patch by a member", jsonCall(t, "PATCH", url, o.member, map[string]any{"name": "x"}), 403, "role_forbidden")
	wantProblem(t, "patch an unknown id", jsonCall(t, "PATCH", o.base+"/storage/destinations/dst_"+strings.Repeat("0", 32), o.owner, map[string]any{"name": "x"}), 404, "storage_destination_not_found")
	r, got := jsonObject(t, "PATCH", url, o.owner, map[string]any{"secret_access_key": srv.SecretKey})
	if r.status != 200 || bytes.Contains(r.body, []byte(srv.SecretKey)) {
		t.Fatalf("patch the secret: %d %s", r.status, r.body)
	}
	if r, got = jsonObject(t, "POST", url+"/verify", o.owner, nil); r.status != 200 || got["verified_at"] == nil || got["last_error"] != nil {
		t.Fatalf("verify: %d %s", r.status, r.body)
	}
	if r, got = jsonObject(t, "PATCH", url, o.owner, map[string]any{"name": "renamed"}); r.status != 200 || got["name"] != "renamed" || got["verified_at"] == nil {
		t.Fatalf("rename: %d %s (verification must stay)", r.status, r.body)
	}
	if r, got = jsonObject(t, "PATCH", url, o.owner, map[string]any{"prefix": "p2"}); r.status != 200 || got["prefix"] != "p2" || got["verified_at"] != nil {
		t.Fatalf("new prefix: %d %s (verification must clear)", r.status, r.body)
	}
	if r = call(t, "POST", url+"/verify", o.owner, nil); r.status != 200 {
		t.Fatalf("verify again: %d %s", r.status, r.body)
	}

	// A field a request sends that holds a character which shows nothing or reorders the text around it
	// (internal/hiddenchar) is refused naming it, and changes nothing; so is such a storage_key, before any job
	// exists. A destination named before that rule still loads, shows its name as stored, and takes changes to
	// its other fields.
	for _, bad := range []struct {
		method, path string
		body         map[string]any
		char         string
	}{
		{"PATCH", url, map[string]any{"name": "results \u202etsop"}, "U+202E"},
		{"PATCH", url, map[string]any{"prefix": "p2\u200b"}, "U+200B"},
		{"PATCH", url, map[string]any{"bucket": bucket + "\ufeff"}, "U+FEFF"},
		{"POST", o.base + "/storage/destinations", map[string]any{"name": "mine\u2066", "endpoint": srv.Endpoint, "bucket": bucket,
			"access_key_id": srv.AccessKey, "secret_access_key": "x"}, "U+2066"},
	} {
		r := jsonCall(t, bad.method, bad.path, o.owner, bad.body)
		if p := decodeProblem(t, r); r.status != 422 || p.Code != "invalid_request" || !strings.Contains(p.Detail, bad.char) {
			t.Fatalf("%s %s %+q: %d %s, want 422 invalid_request naming %s", bad.method, bad.path, bad.body, r.status, r.body, bad.char)
		}
	}
	r = post(t, o.base+"/watermarks/images?storage_destination_id="+id+"&storage_key="+neturl.QueryEscape("out/a\u202egnp.exe"), o.owner, "", photo(t, 64, 64, 49), `{"k":1}`)
	if p := decodeProblem(t, r); r.status != 422 || p.Code != "invalid_request" || !strings.Contains(p.Detail, "storage_key") || !strings.Contains(p.Detail, "U+202E") {
		t.Fatalf("storage_key with U+202E: %d %s", r.status, r.body)
	}
	_, info := jsonObject(t, "GET", o.base+"/auth/api-key", o.owner, nil)
	recordtest.Rewrite(t, o.n.Store(), "storage/dst/"+info["organization_id"].(string), func(set *storagedest.Set) {
		ds := append([]storagedest.Destination(nil), set.Destinations...)
		ds[0].Name = "results \u202etsop"
		set.Destinations = ds
	})
	if r, got = jsonObject(t, "PATCH", url, o.owner, map[string]any{"enabled": true}); r.status != 200 || got["name"] != "results \u202etsop" ||
		got["prefix"] != "p2" || got["bucket"] != bucket || got["verified_at"] == nil {
		t.Fatalf("changing a destination named before the rule: %d %s", r.status, r.body)
	}

	// Three embeds to the destination; the delivery list pages newest first.
	var deliveries []string // oldest first
	for i := 0; i < 3; i++ {
		r = post(t, o.base+"/watermarks/images?storage_destination_id="+id, o.owner, "", photo(t, 300, 260, uint64(50+i)), fmt.Sprintf(`{"i":%d}`, i))
		if r.status != 200 {
			t.Fatalf("embed %d: %d %s", i, r.status, r.body)
		}
		deliveries = append(deliveries, r.header.Get("X-Storage-Delivery-ID"))
		o.clk.Advance(time.Second) // distinct creation times: a defined order
	}
	// The first delivery's effect may still be on its way to the outbox; wait until all three are listed.
	deadline := time.Now().Add(20 * time.Second)
	var page map[string]any
	for {
		r, page = jsonObject(t, "GET", url+"/deliveries", o.reader, nil)
		if items, _ := page["items"].([]any); r.status == 200 && len(items) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries never all listed: %d %s", r.status, r.body)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition; the deadline bounds it
	}
	if first := page["items"].([]any)[0].(map[string]any); first["id"] != deliveries[2] || first["status"] != "queued" || page["next_cursor"] != nil {
		t.Fatalf("list before the first pass: %s", r.body)
	}
	if _, _, err := o.n.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	var seen []string
	after := ""
	for pages := 0; pages < 5; pages++ {
		q := url + "/deliveries?limit=2"
		if after != "" {
			q += "&after=" + after
		}
		r, page = jsonObject(t, "GET", q, o.reader, nil)
		if r.status != 200 {
			t.Fatalf("list page: %d %s", r.status, r.body)
		}
		for _, it := range page["items"].([]any) {
			m := it.(map[string]any)
			if m["status"] != "stored" || len(m["history"].([]any)) != 1 || m["destination_id"] != id {
				t.Fatalf("listed delivery: %v", m)
			}
			seen = append(seen, m["id"].(string))
		}
		next, _ := page["next_cursor"].(string)
		if next == "" {
			break
		}
		after = next
	}
	if len(seen) != 3 || seen[0] != deliveries[2] || seen[1] != deliveries[1] || seen[2] != deliveries[0] {
		t.Fatalf("paged deliveries %v, want newest first %v", seen, deliveries)
	}
	wantProblem(t, "list with a bad cursor", call(t, "GET", url+"/deliveries?after=evt_1", o.reader, nil), 422, "invalid_cursor")
	wantProblem(t, "list with limit 0", call(t, "GET", url+"/deliveries?limit=0", o.reader, nil), 422, "invalid_request")
	if r := call(t, "GET", url+"/deliveries?limit=&after=", o.reader, nil); r.status != 200 || !bytes.Contains(r.body, []byte(deliveries[2])) {
		t.Fatalf("list with empty limit and after (not sent): %d %s", r.status, r.body)
	}
	wantProblem(t, "list of an unknown destination", call(t, "GET", o.base+"/storage/destinations/dst_"+strings.Repeat("1", 32)+"/deliveries", o.reader, nil), 404, "storage_destination_not_found")

	// Retry: scope, role, unknown id; a stored delivery is answered as it is.
	wantProblem(t, "retry with storage:read only", call(t, "POST", o.base+"/storage/deliveries/"+deliveries[0]+"/retry", o.reader, nil), 403, "insufficient_scope")
	wantProblem(t, "retry by a member", call(t, "POST", o.base+"/storage/deliveries/"+deliveries[0]+"/retry", o.member, nil), 403, "role_forbidden")
	wantProblem(t, "retry of an unknown delivery", call(t, "POST", o.base+"/storage/deliveries/std_"+strings.Repeat("a", 64)+"/retry", o.owner, nil), 404, "not_found")
	if r, got = jsonObject(t, "POST", o.base+"/storage/deliveries/"+deliveries[0]+"/retry", o.owner, nil); r.status != 202 || got["status"] != "stored" {
		t.Fatalf("retry of a stored delivery: %d %s", r.status, r.body)
	}

	// An embed whose destination is deleted before the first attempt: the delivery fails for good.
	r = post(t, o.base+"/watermarks/images?storage_destination_id="+id, o.owner, "", photo(t, 300, 260, 60), `{"i":9}`)
	if r.status != 200 {
		t.Fatalf("embed: %d %s", r.status, r.body)
	}
	orphan := r.header.Get("X-Storage-Delivery-ID")
	_, as := jsonObject(t, "GET", o.base+"/assets/"+r.header.Get("X-Asset-ID"), o.owner, nil)
	waitEffect(t, o.n, as["request_id"].(string))
	wantProblem(t, "delete by a member", call(t, "DELETE", url, o.member, nil), 403, "role_forbidden")
	if r = call(t, "DELETE", url, o.owner, nil); r.status != 204 || len(r.body) != 0 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	wantProblem(t, "get after delete", call(t, "GET", url, o.owner, nil), 404, "storage_destination_not_found")
	wantProblem(t, "delete again", call(t, "DELETE", url, o.owner, nil), 404, "storage_destination_not_found")
	if _, _, err := o.n.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if r, got = jsonObject(t, "GET", o.base+"/storage/deliveries/"+orphan, o.owner, nil); got["status"] != "failed" || got["error_code"] != "storage_destination_not_found" {
		t.Fatalf("delivery to a deleted destination: %d %s", r.status, r.body)
	}
	if got := readBucketObject(t, srv, bucket, "p2/"+deliveriesKey(t, o, deliveries[0])); len(got) == 0 {
		t.Fatal("deleting the destination removed a delivered object")
	}

	// At most 10 destinations.
	for i := 0; i < 10; i++ {
		r = jsonCall(t, "POST", o.base+"/storage/destinations", o.owner, create)
		if r.status != 201 {
			t.Fatalf("destination %d: %d %s", i+1, r.status, r.body)
		}
	}
	wantProblem(t, "an 11th destination", jsonCall(t, "POST", o.base+"/storage/destinations", o.owner, create), 409, "storage_destination_limit")
}

// deliveriesKey is the object key (without the prefix) of a stored delivery.
func deliveriesKey(t *testing.T, o *storageOrg, id string) string {
	t.Helper()
	_, d := jsonObject(t, "GET", o.base+"/storage/deliveries/"+id, o.owner, nil)
	k, _ := d["key"].(string)
	return strings.TrimPrefix(k, "p2/")
}

// TestMoveEarlierResultToDestination: a result of a job that named no destination is moved into one later
// (POST /storage/destinations/{id}/deliveries): refusals first (role, scope, unknown asset, bad key, unverified
// destination, an original upload), then 202 queued and the asset names the delivery; after the outbox pass
// the object holds the result's bytes, the hosted copy is gone (file_expires_at null, staging_deleted_at set),
// the asset's and the job's downloads read the bucket, and the job's webhook got storage.delivery.succeeded.
// The same move again answers the same delivery; another key or destination, or a result whose job had its
// own destination, is 409 storage_destination_conflict. A move onto an existing key fails object_key_conflict
// (a failed event), can be retried by the owner, and keeps the hosted copy.
func TestMoveEarlierResultToDestination(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	o := newStorageOrg(t)
	ctx := context.Background()
	rc := &hookReceiver{stop: make(chan struct{})}
	hook := httptest.NewServer(rc)
	defer hook.Close()
	defer close(rc.stop)
	r, wh := jsonObject(t, "POST", o.base+"/webhooks", o.owner, map[string]any{"url": hook.URL + "/hook"})
	if r.status != 201 {
		t.Fatalf("create webhook: %d %s", r.status, r.body)
	}
	sweep := func() {
		t.Helper()
		if _, _, err := o.n.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	dst, bucket := verifiedDestination(t, o.base, o.owner, srv, srv.Endpoint, "moved")
	r = post(t, o.base+"/watermarks/images?webhook_id="+wh["id"].(string), o.owner, "", photo(t, 300, 260, 70), `{"m":1}`)
	if r.status != 200 {
		t.Fatalf("embed: %d %s", r.status, r.body)
	}
	result, marked, reqID := r.body, r.header.Get("X-Asset-ID"), r.header.Get("X-Request-ID")
	_, as := jsonObject(t, "GET", o.base+"/assets/"+marked, o.owner, nil)
	source := as["parent_asset_id"].(string)
	if as["file_expires_at"] == nil || as["storage_delivery_id"] != nil {
		t.Fatalf("a hosted result before any move: %v", as)
	}
	url := o.base + "/storage/destinations/" + dst + "/deliveries"

	wantProblem(t, "move by a member", jsonCall(t, "POST", url, o.member, map[string]any{"asset_id": marked}), 403, "role_forbidden")
	wantProblem(t, "move with storage:read", jsonCall(t, "POST", url, o.reader, map[string]any{"asset_id": marked}), 403, "insufficient_scope")
	wantProblem(t, "move of an unknown asset", jsonCall(t, "POST", url, o.owner, map[string]any{"asset_id": "ast_" + strings.Repeat("0", 32)}), 404, "asset_not_found")
	wantProblem(t, "move without an asset", jsonCall(t, "POST", url, o.owner, map[string]any{"key": "a"}), 422, "invalid_request")
	wantProblem(t, "move with a bad key", jsonCall(t, "POST", url, o.owner, map[string]any{"asset_id": marked, "key": "../x"}), 422, "invalid_request")
	wantProblem(t, "move with an unknown field", jsonCall(t, "POST", url, o.owner, map[string]any{"asset_id": marked, "to": 1}), 422, "invalid_request")
	wantProblem(t, "move of an original upload", jsonCall(t, "POST", url, o.owner, map[string]any{"asset_id": source}), 422, "invalid_request")
	_, other := jsonObject(t, "POST", o.base+"/storage/destinations", o.owner, map[string]any{"endpoint": srv.Endpoint, "secure": false,
		"bucket": bucket, "access_key_id": srv.AccessKey, "secret_access_key": srv.SecretKey})
	wantProblem(t, "move to an unverified destination", jsonCall(t, "POST", o.base+"/storage/destinations/"+other["id"].(string)+"/deliveries", o.owner,
		map[string]any{"asset_id": marked}), 422, "storage_destination_unusable")

	r, del := jsonObject(t, "POST", url, o.owner, map[string]any{"asset_id": marked, "key": "x/one.jpg"})
	id, _ := del["id"].(string)
	if r.status != 202 || del["status"] != "queued" || !strings.HasPrefix(id, "std_") || r.header.Get("Location") != "/storage/deliveries/"+id {
		t.Fatalf("move: %d %s", r.status, r.body)
	}
	if _, got := jsonObject(t, "GET", o.base+"/storage/deliveries/"+id, o.reader, nil); got["status"] != "queued" || got["asset_id"] != marked {
		t.Fatalf("a queued move reads %v", got)
	}
	if _, as = jsonObject(t, "GET", o.base+"/assets/"+marked, o.owner, nil); as["storage_delivery_id"] != id || as["storage_destination_id"] != dst ||
		as["storage_status"] != "queued" || as["file_expires_at"] == nil || as["staging_deleted_at"] != nil {
		t.Fatalf("the asset while its move is queued: %v", as)
	}
	wantProblem(t, "a second move with another key", jsonCall(t, "POST", url, o.owner, map[string]any{"asset_id": marked, "key": "x/two.jpg"}), 409, "storage_destination_conflict")
	sweep()
	sweep() // the event handed over by the delivery goes out on this pass at the latest
	r, del = jsonObject(t, "GET", o.base+"/storage/deliveries/"+id, o.reader, nil)
	if del["status"] != "stored" || del["key"] != "moved/x/one.jpg" || del["etag"] == nil {
		t.Fatalf("move after the pass: %s", r.body)
	}
	if !bytes.Equal(readBucketObject(t, srv, bucket, "moved/x/one.jpg"), result) {
		t.Fatal("the moved object differs from the result")
	}
	r, as = jsonObject(t, "GET", o.base+"/assets/"+marked, o.owner, nil)
	if as["storage_status"] != "stored" || as["file_expires_at"] != nil || as["staging_deleted_at"] != o.clk.Now().UTC().Format(time.RFC3339) ||
		as["file_available"] != true || as["download_url"] != "/assets/"+marked+"/content" || as["staging_expires_at"] != nil {
		t.Fatalf("the asset once moved: %s", r.body)
	}
	content := call(t, "GET", o.base+"/assets/"+marked+"/content", o.owner, nil)
	if content.status != 200 || !bytes.Equal(content.body, result) || content.header.Get("Accept-Ranges") != "none" || content.header.Get("X-Asset-ID") != marked {
		t.Fatalf("the moved asset's content: %d %v", content.status, content.header)
	}
	if res := call(t, "GET", o.base+"/watermarks/jobs/"+reqID+"/result", o.owner, nil); res.status != 200 || !bytes.Equal(res.body, result) {
		t.Fatalf("the job's result once moved: %d %s", res.status, res.header)
	}
	if _, src := jsonObject(t, "GET", o.base+"/assets/"+source, o.owner, nil); src["file_expires_at"] == nil || src["staging_deleted_at"] != nil {
		t.Fatalf("the original upload lost its hosted file: %v", src)
	}
	evs := storageEvents(t, rc)
	if len(evs) != 1 || evs[0]["type"] != "storage.delivery.succeeded" {
		t.Fatalf("storage events of the move: %v", evs)
	}
	if data, _ := evs[0]["data"].(map[string]any); data["delivery_id"] != id || data["asset_id"] != marked || data["request_id"] != reqID || data["status"] != "stored" {
		t.Fatalf("the move's event data: %v", data)
	}
	if r, again := jsonObject(t, "POST", url, o.owner, map[string]any{"asset_id": marked, "key": "x/one.jpg"}); r.status != 202 || again["id"] != id || again["status"] != "stored" {
		t.Fatalf("the same move again: %d %s", r.status, r.body)
	}
	other2, _ := verifiedDestination(t, o.base, o.owner, srv, srv.Endpoint, "")
	wantProblem(t, "a moved result to another destination", jsonCall(t, "POST", o.base+"/storage/destinations/"+other2+"/deliveries", o.owner,
		map[string]any{"asset_id": marked, "key": "x/one.jpg"}), 409, "storage_destination_conflict")
	r = post(t, o.base+"/watermarks/images?storage_destination_id="+dst, o.owner, "", photo(t, 300, 260, 72), `{"m":3}`)
	if r.status != 200 {
		t.Fatalf("embed with a destination: %d %s", r.status, r.body)
	}
	wantProblem(t, "a move of a result whose job named a destination", jsonCall(t, "POST", o.base+"/storage/destinations/"+other2+"/deliveries", o.owner,
		map[string]any{"asset_id": r.header.Get("X-Asset-ID")}), 409, "storage_destination_conflict")

	// Another result onto the taken key: a conflict, failed for good (a failed event), retried by the owner;
	// its hosted copy stays.
	r = post(t, o.base+"/watermarks/images?webhook_id="+wh["id"].(string), o.owner, "", photo(t, 300, 260, 71), `{"m":2}`)
	if r.status != 200 {
		t.Fatalf("second embed: %d %s", r.status, r.body)
	}
	second := r.header.Get("X-Asset-ID")
	r, clash := jsonObject(t, "POST", url, o.owner, map[string]any{"asset_id": second, "key": "x/one.jpg"})
	if r.status != 202 {
		t.Fatalf("second move: %d %s", r.status, r.body)
	}
	// Two passes: effects of one destination go in order, so the job's own delivery above may hold it back.
	sweep()
	sweep()
	sweep()
	if _, got := jsonObject(t, "GET", o.base+"/storage/deliveries/"+clash["id"].(string), o.reader, nil); got["status"] != "failed" || got["error_code"] != "object_key_conflict" {
		t.Fatalf("move onto a taken key: %v", got)
	}
	if evs = storageEvents(t, rc); len(evs) != 2 || evs[1]["type"] != "storage.delivery.failed" {
		t.Fatalf("storage events after a conflicting move: %v", evs)
	}
	if r, got := jsonObject(t, "POST", o.base+"/storage/deliveries/"+clash["id"].(string)+"/retry", o.owner, nil); r.status != 202 || got["status"] != "retrying" {
		t.Fatalf("retry of a failed move: %d %s", r.status, r.body)
	}
	sweep()
	if _, got := jsonObject(t, "GET", o.base+"/storage/deliveries/"+clash["id"].(string), o.reader, nil); got["status"] != "failed" || len(got["history"].([]any)) != 2 {
		t.Fatalf("a retried conflicting move: %v", got)
	}
	if !bytes.Equal(readBucketObject(t, srv, bucket, "moved/x/one.jpg"), result) {
		t.Fatal("a move overwrote an existing object")
	}
	if _, got := jsonObject(t, "GET", o.base+"/assets/"+second, o.owner, nil); got["storage_status"] != "failed" || got["file_expires_at"] == nil ||
		got["staging_deleted_at"] != nil || got["file_available"] != true {
		t.Fatalf("a result whose move failed: %v", got)
	}
	if c := call(t, "GET", o.base+"/assets/"+second+"/content", o.owner, nil); c.status != 200 || c.header.Get("Accept-Ranges") != "bytes" {
		t.Fatalf("the hosted content of a result whose move failed: %d", c.status)
	}
	_, page := jsonObject(t, "GET", url, o.reader, nil)
	if items, _ := page["items"].([]any); len(items) != 3 {
		t.Fatalf("the destination lists %d deliveries, want the 2 moves and the job's own: %v", len(items), page)
	}
}

// TestStorageBucketRefusingWrites: a bucket whose server only reads (versitygw --readonly on the same data).
// Verifying against it fails at the write step naming s3:PutObject; a destination verified while the bucket
// took writes, whose endpoint then starts refusing them, keeps the delivery retrying with
// storage_access_denied (the customer can fix the permission), and once writes are allowed again the next
// attempt stores the result.
func TestStorageBucketRefusingWrites(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	ro := srv.ReadOnlyTwin(t)
	o := newStorageOrg(t)
	ctx := context.Background()
	bucket := srv.NewBucket(t)
	r, dst := jsonObject(t, "POST", o.base+"/storage/destinations", o.owner, map[string]any{"endpoint": ro.Endpoint, "secure": false,
		"region": srv.Region, "bucket": bucket, "path_style": true, "access_key_id": srv.AccessKey, "secret_access_key": srv.SecretKey})
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	r = call(t, "POST", o.base+"/storage/destinations/"+dst["id"].(string)+"/verify", o.owner, nil)
	if p := decodeProblem(t, r); r.status != 422 || p.Code != "storage_verification_failed" || !strings.HasPrefix(p.Detail, "write:") || !strings.Contains(p.Detail, "s3:PutObject") {
		t.Fatalf("verify against a read-only bucket: %d %s", r.status, r.body)
	}

	ep := newSwitchable(t, srv.Endpoint)
	id, _ := verifiedDestination(t, o.base, o.owner, srv, ep.addr, "w")
	ep.retarget(ro.Endpoint) // the bucket stops taking writes after the verification
	r = post(t, o.base+"/watermarks/images?storage_destination_id="+id, o.owner, "", photo(t, 300, 260, 80), `{"ro":1}`)
	if r.status != 200 {
		t.Fatalf("embed: %d %s", r.status, r.body)
	}
	delivery := r.header.Get("X-Storage-Delivery-ID")
	_, as := jsonObject(t, "GET", o.base+"/assets/"+r.header.Get("X-Asset-ID"), o.owner, nil)
	waitEffect(t, o.n, as["request_id"].(string))
	if _, _, err := o.n.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	r, del := jsonObject(t, "GET", o.base+"/storage/deliveries/"+delivery, o.owner, nil)
	if del["status"] != "retrying" || del["error_code"] != "storage_access_denied" || !strings.Contains(del["last_error"].(string), "s3:PutObject") {
		t.Fatalf("delivery to a bucket refusing writes: %s", r.body)
	}
	ep.retarget(srv.Endpoint)
	o.clk.Advance(30 * time.Second)
	if _, _, err := o.n.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if r, del = jsonObject(t, "GET", o.base+"/storage/deliveries/"+delivery, o.owner, nil); del["status"] != "stored" {
		t.Fatalf("delivery once writes are allowed: %s", r.body)
	}
}

// TestStorageDeliveryContent: GET /storage/deliveries/{id}/content reads a stored object back from the
// bucket with a storage:read key; so do the job's result and the asset's download once the hosted copy is
// gone (503 naming the step while the bucket is down); a delivery that is not stored, an object replaced in
// the bucket since (another ETag) and an object deleted there answer 410 storage_object_unavailable.
func TestStorageDeliveryContent(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	ep := newSwitchable(t, srv.Endpoint)
	o := newStorageOrg(t)
	ctx := context.Background()
	dst, bucket := verifiedDestination(t, o.base, o.owner, srv, ep.addr, "")
	r := post(t, o.base+"/watermarks/images?storage_key=c/one.jpg&storage_destination_id="+dst, o.owner, "", photo(t, 300, 260, 90), `{"c":1}`)
	if r.status != 200 {
		t.Fatalf("embed: %d %s", r.status, r.body)
	}
	result, delivery, ctype := r.body, r.header.Get("X-Storage-Delivery-ID"), r.header.Get("Content-Type")
	assetURL, resultURL := o.base+"/assets/"+r.header.Get("X-Asset-ID")+"/content", o.base+"/watermarks/jobs/"+r.header.Get("X-Request-ID")+"/result"
	url := o.base + "/storage/deliveries/" + delivery + "/content"
	wantProblem(t, "content before delivery", call(t, "GET", url, o.reader, nil), 404, "not_found")
	_, as := jsonObject(t, "GET", o.base+"/assets/"+r.header.Get("X-Asset-ID"), o.owner, nil)
	waitEffect(t, o.n, as["request_id"].(string))
	if _, _, err := o.n.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	got := call(t, "GET", url, o.reader, nil)
	if got.status != 200 || !bytes.Equal(got.body, result) || got.header.Get("Content-Type") != ctype || got.header.Get("ETag") == "" {
		t.Fatalf("content: %d %q (%d bytes, want %d)", got.status, got.header, len(got.body), len(result))
	}
	// The hosted copy is gone: the job's result (within its 24 h) and the asset's download read the bucket.
	if got = call(t, "GET", resultURL, o.owner, nil); got.status != 200 || !bytes.Equal(got.body, result) || got.header.Get("X-Storage-Delivery-ID") != delivery {
		t.Fatalf("the job's result once delivered: %d %q", got.status, got.header)
	}
	ep.down()
	if got = call(t, "GET", assetURL, o.owner, nil); got.header.Get("Retry-After") != "30" {
		t.Fatalf("the asset's download while the bucket is down: %d %q", got.status, got.header)
	}
	wantProblem(t, "the asset's download while the bucket is down", got, 503, "service_unavailable")
	ep.up()
	if _, err := srv.Client().PutObject(ctx, bucket, "c/one.jpg", bytes.NewReader([]byte("replaced")), 8, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, "content of a replaced object", call(t, "GET", url, o.reader, nil), 410, "storage_object_unavailable")
	wantProblem(t, "the asset's download of a replaced object", call(t, "GET", assetURL, o.owner, nil), 410, "storage_object_unavailable")
	wantProblem(t, "the job's result of a replaced object", call(t, "GET", resultURL, o.owner, nil), 410, "storage_object_unavailable")
	if err := srv.Client().RemoveObject(ctx, bucket, "c/one.jpg", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, "content of a deleted object", call(t, "GET", url, o.reader, nil), 410, "storage_object_unavailable")
}

// TestStorageDeliveryGivesUpAfter30Days: a destination that stays down is retried on the schedule (the
// webhook schedule, then every 8 h) for 30 days on the manual clock, the output staying staged all along
// (a trial organization's file retention is exactly 30 days); after the last attempt the delivery is failed
// with storage_unreachable, and the webhook gets one storage.delivery.failed.
func TestStorageDeliveryGivesUpAfter30Days(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	ep := newSwitchable(t, srv.Endpoint)
	f := newFixture(t, func(c *node.Config) { c.AllowPrivateTargets = true })
	ctx := context.Background()
	rc := &hookReceiver{stop: make(chan struct{})}
	hook := httptest.NewServer(rc)
	defer hook.Close()
	defer close(rc.stop)
	_, wh := jsonObject(t, "POST", f.base+"/webhooks", f.keyA, map[string]any{"url": hook.URL + "/hook"})
	dst, _ := verifiedDestination(t, f.base, f.keyA, srv, ep.addr, "")
	ep.down()
	r := post(t, f.base+"/watermarks/images/async?webhook_id="+wh["id"].(string)+"&storage_destination_id="+dst, f.keyA, "", photo(t, 300, 260, 95), `{"d":30}`)
	if r.status != 202 {
		t.Fatalf("async embed: %d %s", r.status, r.body)
	}
	rc0 := decodeReceipt(t, r)
	if res := waitResult(t, f, f.keyA, rc0.ResultURL); res.status != 200 {
		t.Fatalf("result: %d", res.status)
	}
	waitEffect(t, f.n, rc0.RequestID)
	ob, _ := f.n.Outbox()
	fx := outbox.EffectID("fx_", rc0.RequestID, actors.OutboxJobStorage)
	first := f.clk.Now()
	schedule := node.StorageSchedule()
	var del map[string]any
	for i := 0; i <= len(schedule); i++ {
		ent, err := ob.Get(ctx, fx)
		if err != nil {
			t.Fatal(err)
		}
		if d := ent.NextAt.Sub(f.clk.Now()); d > 0 {
			f.clk.Advance(d) // exactly to the next attempt
		}
		if _, _, err := f.n.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		_, del = jsonObject(t, "GET", f.base+"/storage/deliveries/"+jobstateDeliveryID(rc0.RequestID), f.keyA, nil)
		want := "retrying"
		if i == len(schedule) {
			want = "failed"
		}
		if del["status"] != want || del["attempts"] != float64(i+1) || del["error_code"] != "storage_unreachable" {
			t.Fatalf("attempt %d at +%v: %v, want %s", i+1, f.clk.Now().Sub(first), del, want)
		}
	}
	if elapsed := f.clk.Now().Sub(first); elapsed > 30*24*time.Hour || elapsed < 29*24*time.Hour {
		t.Fatalf("the last attempt came %v after the first, want within 30 days", elapsed)
	}
	if _, _, err := f.n.Sweep(ctx); err != nil { // the failed event, handed over by the last attempt
		t.Fatal(err)
	}
	evs := storageEvents(t, rc)
	if len(evs) != 1 || evs[0]["type"] != "storage.delivery.failed" || evs[0]["data"].(map[string]any)["error_code"] != "storage_unreachable" {
		t.Fatalf("events after giving up: %v", evs)
	}
}

func jobstateDeliveryID(requestID string) string { return jobstate.StorageDeliveryIDFor(requestID) }

// TestStorageDestinationEtchvShape: a destination created the way Etchv's SDKs pass options through
// (`credentials` as JSON text, `visibility`, `role_arn`) works; what cannot be served is refused clearly; a
// PATCH of `{enabled, credentials}` clears the verification, and a disabled destination cannot be named.
func TestStorageDestinationEtchvShape(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	o := newStorageOrg(t)
	bucket := srv.NewBucket(t)
	creds := fmt.Sprintf(`{"access_key_id":%q,"secret_access_key":%q}`, srv.AccessKey, srv.SecretKey)
	body := func(extra map[string]any) map[string]any {
		b := map[string]any{"name": "sdk", "provider": "s3", "bucket": bucket, "prefix": "etchv", "visibility": "private",
			"region": srv.Region, "role_arn": nil, "endpoint": srv.Endpoint, "secure": false, "path_style": true, "credentials": creds}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	url := o.base + "/storage/destinations"
	wantProblem(t, "role_arn", jsonCall(t, "POST", url, o.owner, body(map[string]any{"role_arn": "arn:aws:iam::1:role/x"})), 422, "invalid_request")
	wantProblem(t, "public visibility", jsonCall(t, "POST", url, o.owner, body(map[string]any{"visibility": "public"})), 422, "invalid_request")
	wantProblem(t, "credentials not JSON", jsonCall(t, "POST", url, o.owner, body(map[string]any{"credentials": "key:secret"})), 422, "invalid_request")
	wantProblem(t, "credentials and keys", jsonCall(t, "POST", url, o.owner, body(map[string]any{"access_key_id": srv.AccessKey})), 422, "invalid_request")
	// The SDKs never send secure: such a destination is HTTPS. (This test's local S3 server is plain HTTP, so
	// the destinations it verifies pass "secure": false through the SDKs' extra options.)
	sdkBody := body(nil)
	delete(sdkBody, "secure")
	if r, d := jsonObject(t, "POST", url, o.owner, sdkBody); r.status != 201 || d["secure"] != true {
		t.Fatalf("create without secure: %d %s; want 201 and secure true", r.status, r.body)
	}
	r, dst := jsonObject(t, "POST", url, o.owner, body(nil))
	if r.status != 201 || dst["visibility"] != "private" || bytes.Contains(r.body, []byte(srv.SecretKey)) {
		t.Fatalf("create the Etchv way: %d %s", r.status, r.body)
	}
	id := dst["id"].(string)
	if r = call(t, "POST", url+"/"+id+"/verify", o.owner, nil); r.status != 200 {
		t.Fatalf("verify with keys from credentials: %d %s", r.status, r.body)
	}
	r, got := jsonObject(t, "PATCH", url+"/"+id, o.owner, map[string]any{"enabled": false, "credentials": creds})
	if r.status != 200 || got["enabled"] != false || got["verified_at"] != nil {
		t.Fatalf("patch {enabled, credentials}: %d %s", r.status, r.body)
	}
	if r = call(t, "POST", url+"/"+id+"/verify", o.owner, nil); r.status != 200 {
		t.Fatalf("verify again: %d %s", r.status, r.body)
	}
	r = post(t, o.base+"/watermarks/images?storage_destination_id="+id, o.owner, "", photo(t, 300, 260, 99), `{"e":1}`)
	wantProblem(t, "embed to a disabled destination", r, 422, "storage_destination_unusable")
}

// TestStorageHostileEndpointErrorHTTP: an endpoint (any server a customer names) refusing the probe write with
// an XML error whose message holds a right-to-left override (XML cannot carry ESC; the storagedest and CLI
// tests send it as plain text) and runs to 900 KiB is answered, in the 422 detail and the destination's
// last_error, escaped and cut to 1024 bytes (docs/api.md, "Text from remote servers").
func TestStorageHostileEndpointErrorHTTP(t *testing.T) {
	t.Parallel()
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `<?xml version="1.0"?><Error><Code>Hostile</Code><Message>`+"\u202e"+`exe.txt `+
			strings.Repeat("y", 900<<10)+`</Message></Error>`)
	}))
	defer hostile.Close()
	o := newStorageOrg(t)
	r, dst := jsonObject(t, "POST", o.base+"/storage/destinations", o.owner, map[string]any{"endpoint": strings.TrimPrefix(hostile.URL, "http://"),
		"secure": false, "region": "us-east-1", "bucket": "acme-results", "path_style": true, "access_key_id": "AKIAEXAMPLE", "secret_access_key": "s"})
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	url := o.base + "/storage/destinations/" + dst["id"].(string)
	r = call(t, "POST", url+"/verify", o.owner, nil)
	p := decodeProblem(t, r)
	_, d := jsonObject(t, "GET", url, o.owner, nil)
	last, _ := d["last_error"].(string)
	for what, s := range map[string]string{"detail": p.Detail, "last_error": last} {
		if len(s) > 1100 || strings.ContainsRune(s, '\u202e') || !strings.Contains(s, `HTTP 400 Hostile \u202eexe.txt yyy`) || !strings.HasSuffix(s, "…") {
			t.Errorf("%s: %d bytes %+q", what, len(s), s[:min(len(s), 200)])
		}
	}
	if r.status != 422 || p.Code != "storage_verification_failed" {
		t.Fatalf("verify against a hostile endpoint: %d %s", r.status, p.Code)
	}
	// A last_error stored before the node escaped remote text, holding an OSC 52 clipboard write and 300 KB,
	// is answered escaped and bounded too.
	_, info := jsonObject(t, "GET", o.base+"/auth/api-key", o.owner, nil)
	recordtest.Rewrite(t, o.n.Store(), "storage/dst/"+info["organization_id"].(string), func(set *storagedest.Set) {
		ds := append([]storagedest.Destination(nil), set.Destinations...)
		ds[0].LastError = "write: \x1b]52;c;cm0gLXJmIH4=\a" + strings.Repeat("z", 300<<10)
		set.Destinations = ds
	})
	_, d = jsonObject(t, "GET", url, o.owner, nil)
	if last, _ = d["last_error"].(string); len(last) > 1100 || strings.ContainsAny(last, "\x1b\a") || !strings.HasPrefix(last, `write: \u001b]52;c;cm0gLXJmIH4=\u0007zzz`) {
		t.Errorf("a last_error stored before: %d bytes %+q", len(last), last[:min(len(last), 200)])
	}
}
