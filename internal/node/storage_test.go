package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"filigrane/actors"
	"filigrane/actors/outbox"
	"filigrane/internal/node"
	"filigrane/persistence/s3test"
)

// switchable is a TCP forwarder to an S3 server that the test takes down (connections refused) and brings
// back on the same address: the customer's endpoint going away and coming back.
type switchable struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
}

func newSwitchable(t *testing.T, target string) *switchable {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &switchable{t: t, addr: ln.Addr().String(), target: target}
	s.serve(ln)
	t.Cleanup(s.down)
	return s
}

func (s *switchable) serve(ln net.Listener) {
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s.mu.Lock()
				target := s.target
				s.mu.Unlock()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); _ = u.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
}

// retarget sends new connections to another server (open connections keep theirs).
func (s *switchable) retarget(target string) {
	s.mu.Lock()
	s.target = target
	s.mu.Unlock()
}

func (s *switchable) down() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		_ = s.ln.Close()
		s.ln = nil
	}
}

func (s *switchable) up() {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		s.t.Fatalf("listen again on %s: %v", s.addr, err)
	}
	s.serve(ln)
}

// jsonObject sends a JSON call and decodes the answer as an object (nil when it is not one).
func jsonObject(t *testing.T, method, url, key string, body any) (response, map[string]any) {
	t.Helper()
	r := jsonCall(t, method, url, key, body)
	var m map[string]any
	_ = json.Unmarshal(r.body, &m)
	return r, m
}

// jobOfAsset is the request id of the job that made the asset (the sync answer's X-Request-ID is the HTTP
// request's own id).
func jobOfAsset(t *testing.T, f *fixture, assetID string) string {
	t.Helper()
	r, a := jsonObject(t, "GET", f.base+"/assets/"+assetID, f.keyA, nil)
	id, _ := a["request_id"].(string)
	if r.status != 200 || !strings.HasPrefix(id, "req_") {
		t.Fatalf("asset %s: %d %s", assetID, r.status, r.body)
	}
	return id
}

// waitEffect waits until the job's storage effect is in the outbox (the job actor hands it over right after
// the commit that answered the request).
func waitEffect(t *testing.T, n *node.Node, requestID string) {
	t.Helper()
	ob, _ := n.Outbox()
	id := outbox.EffectID("fx_", requestID, actors.OutboxJobStorage)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := ob.Get(context.Background(), id); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("storage effect of %s never reached the outbox", requestID)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition; the deadline bounds it
	}
}

// TestStorageDestinationDelivery: a destination is created (its secret never shown), refused by embeds until
// verified, verified against a real S3 server; a delivery while the endpoint is down is retried on the
// schedule (manual clock) and lands once it is back, with the storage fields readable; a second result under
// the same key does not overwrite the first; deleting the asset leaves the customer's object in place.
func TestStorageDestinationDelivery(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	ep := newSwitchable(t, srv.Endpoint)
	f := newFixture(t, func(c *node.Config) { c.AllowPrivateTargets = true })
	ctx := context.Background()

	r, dst := jsonObject(t, "POST", f.base+"/storage/destinations", f.keyA, map[string]any{
		"name": "mine", "endpoint": ep.addr, "secure": false, "region": srv.Region, "bucket": bucket, "prefix": "filigrane",
		"path_style": true, "access_key_id": srv.AccessKey, "secret_access_key": srv.SecretKey})
	if r.status != 201 || dst["verified_at"] != nil {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if bytes.Contains(r.body, []byte(srv.SecretKey)) || bytes.Contains(r.body, []byte("access_key")) {
		t.Fatalf("credentials returned: %s", r.body)
	}
	id := dst["id"].(string)
	img := photo(t, 512, 512, 3)
	r = post(t, f.base+"/watermarks/images?storage_destination_id="+id, f.keyA, "", img, `{"a":1}`)
	if r.status != 422 || decodeProblem(t, r).Code != "storage_destination_unusable" {
		t.Fatalf("embed to an unverified destination: %d %s", r.status, r.body)
	}
	r = call(t, "POST", f.base+"/storage/destinations/"+id+"/verify", f.keyA, nil)
	if r.status != 200 || !strings.Contains(string(r.body), `"verified_at":"`) {
		t.Fatalf("verify: %d %s", r.status, r.body)
	}

	ep.down()
	r = post(t, f.base+"/watermarks/images?storage_key=out/a.png&storage_destination_id="+id, f.keyA, "", img, `{"a":1}`)
	if r.status != 200 {
		t.Fatalf("embed: %d %s", r.status, r.body)
	}
	out := r.body
	delivery, assetID := r.header.Get("X-Storage-Delivery-ID"), r.header.Get("X-Asset-ID")
	reqID := jobOfAsset(t, f, assetID)
	if !strings.HasPrefix(delivery, "std_") || len(delivery) != 68 {
		t.Fatalf("X-Storage-Delivery-ID %q", delivery)
	}
	waitEffect(t, f.n, reqID)
	if _, _, err := f.n.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	r, del := jsonObject(t, "GET", f.base+"/storage/deliveries/"+delivery, f.keyA, nil)
	if r.status != 200 || del["status"] != "retrying" || !strings.Contains(del["last_error"].(string), "connect") {
		t.Fatalf("delivery while the endpoint is down: %d %s", r.status, r.body)
	}
	r, rc := jsonObject(t, "GET", f.base+"/watermarks/jobs/"+reqID, f.keyA, nil)
	if rc["storage_delivery_id"] != delivery || rc["storage_destination_id"] != id || rc["storage_provider"] != "s3" {
		t.Fatalf("receipt storage fields: %s", r.body)
	}

	ep.up()
	f.clk.Advance(29 * time.Second)
	if _, _, err := f.n.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, del = jsonObject(t, "GET", f.base+"/storage/deliveries/"+delivery, f.keyA, nil); del["status"] != "retrying" {
		t.Fatalf("delivered before the schedule's 30 s: %v", del)
	}
	f.clk.Advance(time.Second)
	if _, _, err := f.n.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	r, del = jsonObject(t, "GET", f.base+"/storage/deliveries/"+delivery, f.keyA, nil)
	if del["status"] != "stored" || del["key"] != "filigrane/out/a.png" || del["etag"] == nil || del["completed_at"] == nil ||
		del["asset_id"] != assetID {
		t.Fatalf("delivery once the endpoint is back: %s", r.body)
	}
	readObject := func() []byte {
		t.Helper()
		obj, err := srv.Client().GetObject(ctx, bucket, "filigrane/out/a.png", minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(obj)
		if err != nil {
			t.Fatalf("read the delivered object: %v", err)
		}
		return b
	}
	if !bytes.Equal(readObject(), out) {
		t.Fatal("the delivered object differs from the watermarked output")
	}

	// Another result under the same key: the delivery fails for good, the first object stays.
	r = post(t, f.base+"/watermarks/images?storage_key=out/a.png&storage_destination_id="+id, f.keyA, "", photo(t, 512, 512, 4), `{"a":2}`)
	if r.status != 200 {
		t.Fatalf("second embed: %d %s", r.status, r.body)
	}
	second := r.header.Get("X-Storage-Delivery-ID")
	waitEffect(t, f.n, jobOfAsset(t, f, r.header.Get("X-Asset-ID")))
	if _, _, err := f.n.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	r, del = jsonObject(t, "GET", f.base+"/storage/deliveries/"+second, f.keyA, nil)
	if del["status"] != "failed" || !strings.Contains(del["last_error"].(string), "already exists") {
		t.Fatalf("delivery over an existing object: %s", r.body)
	}
	if !bytes.Equal(readObject(), out) {
		t.Fatal("an existing object was overwritten")
	}

	// Deleting the asset does not delete the customer's object (spec 4.7).
	if r = call(t, "DELETE", f.base+"/assets/"+assetID, f.keyA, nil); r.status != 204 {
		t.Fatalf("delete asset: %d %s", r.status, r.body)
	}
	if !bytes.Equal(readObject(), out) {
		t.Fatal("deleting the asset changed the customer's object")
	}

	// Other organizations see nothing.
	if r = call(t, "GET", f.base+"/storage/deliveries/"+delivery, f.keyExpiring, nil); r.status != 404 {
		t.Fatalf("another org reads the delivery: %d", r.status)
	}
	if r = call(t, "GET", f.base+"/storage/destinations/"+id, f.keyExpiring, nil); r.status != 404 {
		t.Fatalf("another org reads the destination: %d", r.status)
	}
	r, _ = jsonObject(t, "GET", f.base+"/storage/destinations", f.keyA, nil)
	var list []map[string]any
	if err := json.Unmarshal(r.body, &list); err != nil || len(list) != 1 || list[0]["id"] != id {
		t.Fatalf("list: %s", r.body)
	}
}

// TestStorageDestinationRefusesLoopbackByDefault: without the development option, a destination on a
// loopback address fails verification at the connect step (SSRF guard) and stays unusable.
func TestStorageDestinationRefusesLoopbackByDefault(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	f := newFixture(t)
	r, dst := jsonObject(t, "POST", f.base+"/storage/destinations", f.keyA, map[string]any{
		"endpoint": srv.Endpoint, "secure": false, "region": srv.Region, "bucket": srv.NewBucket(t), "path_style": true,
		"access_key_id": srv.AccessKey, "secret_access_key": srv.SecretKey})
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	r = call(t, "POST", f.base+"/storage/destinations/"+dst["id"].(string)+"/verify", f.keyA, nil)
	if p := decodeProblem(t, r); r.status != 422 || p.Code != "storage_verification_failed" || !strings.HasPrefix(p.Detail, "connect:") {
		t.Fatalf("verify of a loopback endpoint: %d %s", r.status, r.body)
	}
	if r = call(t, "POST", f.base+"/storage/destinations", f.keyB, nil); r.status != 403 {
		t.Fatalf("create without storage:write: %d", r.status)
	}
}

// TestDeliveryContentTypeIsNotTheBucket's: the owner of a destination's bucket changes a delivered object's
// Content-Type to text/html by copying it onto itself (the ETag stays, so the object still reads as the
// delivered one); GET /storage/deliveries/{id}/content still answers the result's own type with nosniff.
// Before, it passed the bucket's type through, so a bucket (or a hostile S3 server) could have a result served
// as an HTML page, under /console/api/... on the console's origin.
func TestDeliveryContentTypeIsNotTheBucket(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	f := newFixture(t, func(c *node.Config) { c.AllowPrivateTargets = true })
	ctx := context.Background()
	r, dst := jsonObject(t, "POST", f.base+"/storage/destinations", f.keyA, map[string]any{
		"endpoint": srv.Endpoint, "secure": false, "region": srv.Region, "bucket": bucket, "path_style": true,
		"access_key_id": srv.AccessKey, "secret_access_key": srv.SecretKey})
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	id := dst["id"].(string)
	if r = call(t, "POST", f.base+"/storage/destinations/"+id+"/verify", f.keyA, nil); r.status != 200 {
		t.Fatalf("verify: %d %s", r.status, r.body)
	}
	r = post(t, f.base+"/watermarks/images?storage_key=page.png&storage_destination_id="+id, f.keyA, "", photo(t, 512, 512, 5), `{"a":1}`)
	if r.status != 200 {
		t.Fatalf("embed: %d %s", r.status, r.body)
	}
	out, delivery := r.body, r.header.Get("X-Storage-Delivery-ID")
	waitEffect(t, f.n, jobOfAsset(t, f, r.header.Get("X-Asset-ID")))
	if _, _, err := f.n.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	r, del := jsonObject(t, "GET", f.base+"/storage/deliveries/"+delivery, f.keyA, nil)
	if del["status"] != "stored" {
		t.Fatalf("delivery: %s", r.body)
	}

	c := srv.Client()
	before, err := c.StatObject(ctx, bucket, "page.png", minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CopyObject(ctx, minio.CopyDestOptions{Bucket: bucket, Object: "page.png", ReplaceMetadata: true,
		ContentType: "text/html"}, minio.CopySrcOptions{Bucket: bucket, Object: "page.png"}); err != nil {
		t.Fatalf("copy the object onto itself with another type: %v", err)
	}
	after, err := c.StatObject(ctx, bucket, "page.png", minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ContentType != "text/html" || after.ETag != before.ETag {
		t.Fatalf("the bucket's object after the copy: type %q, ETag %q (was %q)", after.ContentType, after.ETag, before.ETag)
	}

	r = call(t, "GET", f.base+"/storage/deliveries/"+delivery+"/content", f.keyA, nil)
	if r.status != 200 || !bytes.Equal(r.body, out) {
		t.Fatalf("content: %d (%d bytes; want the %d delivered)", r.status, len(r.body), len(out))
	}
	if ct := r.header.Get("Content-Type"); ct != "image/png" || r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("content served as %q, X-Content-Type-Options %q; want image/png, nosniff", ct, r.header.Get("X-Content-Type-Options"))
	}
}
