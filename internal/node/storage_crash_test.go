package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"filigrane/internal/admin"
	"filigrane/internal/clock"
	"filigrane/persistence/s3test"
)

// holdingProxy forwards TCP to an S3 server; while held, the server's answers are kept back (requests still
// go through). It makes "the object is written but the node has not heard back yet" a state a test can stop
// in, on reused keep-alive connections too.
type holdingProxy struct {
	addr   string
	mu     sync.Mutex
	cond   *sync.Cond
	held   bool
	closed bool
}

func newHoldingProxy(t *testing.T, target string) *holdingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdingProxy{addr: ln.Addr().String()}
	p.cond = sync.NewCond(&p.mu)
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		p.closed = true
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c, target)
		}
	}()
	return p
}

func (p *holdingProxy) serve(c net.Conn, target string) {
	defer c.Close()
	u, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer u.Close()
	go func() { _, _ = io.Copy(u, c); _ = u.(*net.TCPConn).CloseWrite() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := u.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.held && !p.closed {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *holdingProxy) hold(on bool) {
	p.mu.Lock()
	p.held = on
	p.cond.Broadcast()
	p.mu.Unlock()
}

// TestStorageDeliverySurvivesKill: a `filigrane serve` process delivers a result to a bucket and is killed
// with SIGKILL after the bucket stored the object but before the node heard the answer (so before it could
// record the delivery). Restarted on its data directory, it attempts the delivery again, recognises its own
// object (conditional create refused, the object carries this request's id) and records it stored: exactly
// one object, the result's bytes, the delivery's ETag the object's.
func TestStorageDeliverySurvivesKill(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("multi-process test")
	}
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	proxy := newHoldingProxy(t, srv.Endpoint)
	dir := t.TempDir()
	var secret string
	offline(t, dir, clock.System{}, func(a admin.Admin) { _, secret = newOwnerKey(t, a, "Crash") })
	procs, base := startSolo(t, dir, append([]string{"--allow-private-targets"}, quickRecovery...)...)

	r, dst := jsonObject(t, "POST", base+"/storage/destinations", secret, map[string]any{
		"endpoint": proxy.addr, "secure": false, "region": srv.Region, "bucket": bucket, "path_style": true,
		"access_key_id": srv.AccessKey, "secret_access_key": srv.SecretKey})
	if r.status != 201 {
		t.Fatalf("create destination: %d %s", r.status, r.body)
	}
	if r = call(t, "POST", base+"/storage/destinations/"+dst["id"].(string)+"/verify", secret, nil); r.status != 200 {
		t.Fatalf("verify: %d %s", r.status, r.body)
	}

	proxy.hold(true)
	r = post(t, base+"/watermarks/images?storage_key=crash/one.jpg&storage_destination_id="+dst["id"].(string), secret, "", photo(t, 400, 300, 77), `{"crash":1}`)
	if r.status != 200 {
		t.Fatalf("embed: %d %s", r.status, r.body)
	}
	result, delivery, asset := r.body, r.header.Get("X-Storage-Delivery-ID"), r.header.Get("X-Asset-ID")
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := srv.Client().StatObject(ctx, bucket, "crash/one.jpg", minio.StatObjectOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delivery never reached the bucket\n%s", procs.List[0].Tail(30))
		}
		time.Sleep(20 * time.Millisecond) // polling the bucket; the deadline bounds it
	}
	if r = call(t, "GET", base+"/storage/deliveries/"+delivery, secret, nil); r.status != 404 {
		t.Fatalf("the delivery was recorded before the node heard the bucket's answer: %d %s", r.status, r.body)
	}
	// Never the reverse: until the delivery is recorded stored, the hosted copy stays.
	if _, as := jsonObject(t, "GET", base+"/assets/"+asset, secret, nil); as["file_expires_at"] == nil || as["staging_deleted_at"] != nil {
		t.Fatalf("the hosted copy ended before the delivery was recorded: %v", as)
	}
	if err := procs.List[0].Kill(); err != nil {
		t.Fatal(err)
	}
	proxy.hold(false)
	rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer rcancel()
	if err := procs.List[0].Restart(rctx); err != nil {
		t.Fatal(err)
	}
	var del map[string]any
	deadline = time.Now().Add(90 * time.Second) // the next sweep (1 s), or the dead node's lease (4 s) first (quickRecovery)
	for {
		var got response
		got, del = jsonObject(t, "GET", base+"/storage/deliveries/"+delivery, secret, nil)
		if got.status == 200 && del["status"] != "retrying" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery after the restart: %d %s\n%s", got.status, got.body, procs.List[0].Tail(30))
		}
		time.Sleep(100 * time.Millisecond) // polling a condition; the deadline bounds it
	}
	var objects []minio.ObjectInfo
	for obj := range srv.Client().ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		objects = append(objects, obj)
	}
	if del["status"] != "stored" || len(objects) != 1 || objects[0].Key != "crash/one.jpg" {
		b, _ := json.Marshal(del)
		t.Fatalf("after the restart: delivery %s, objects %v", b, objects)
	}
	if etag, _ := del["etag"].(string); etag == "" || trimQuotes(etag) != trimQuotes(objects[0].ETag) {
		t.Fatalf("delivery etag %v, object's %q", del["etag"], objects[0].ETag)
	}
	if !bytes.Equal(readBucketObject(t, srv, bucket, "crash/one.jpg"), result) {
		t.Fatal("the object differs from the result")
	}
	sctx, scancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer scancel()
	if err := procs.List[0].Stop(sctx); err != nil {
		t.Fatal(err)
	}
}

func trimQuotes(s string) string { return string(bytes.Trim([]byte(s), `"`)) }

// stagedCopies lists the cluster's hosted files (blobs/ in its bucket) whose bytes are want. A file listed and
// then removed before its read (the node's removal racing the listing) is not counted: it is gone.
func stagedCopies(t *testing.T, srv *s3test.Server, bucket string, want []byte) []string {
	t.Helper()
	var out []string
	for obj := range srv.Client().ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Prefix: "blobs/", Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		if obj.Size != int64(len(want)) {
			continue
		}
		b, err := readObject(srv, bucket, obj.Key)
		if gone := (minio.ErrorResponse{}); errors.As(err, &gone) && gone.Code == "NoSuchKey" {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(b, want) {
			out = append(out, obj.Key)
		}
	}
	return out
}

// TestStagingRemovalSurvivesKill: a `filigrane serve` process on object storage delivers a result to a
// customer bucket; the removal of the hosted copy (the DELETE of its file) is held at the storage proxy, so
// the node is killed with SIGKILL after the delivery was recorded stored and before the copy was removed
// (checked: delivery stored, the asset says staging_deleted_at, the file still in the cluster's bucket).
// Restarted, the node repeats the end of the delivery: the hosted copy is removed, the customer bucket holds
// one object, and the asset's download reads it back from there.
func TestStagingRemovalSurvivesKill(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("multi-process test")
	}
	srv := s3test.Start(t)
	gate := newGatedS3Method(t, srv.Endpoint, "DELETE", "/blobs/")
	direct := s3Config(t, srv)
	customer := srv.NewBucket(t)
	var secret string
	(&clusterFixture{s3: direct}).admin(t, func(a admin.Admin) { _, secret = newOwnerKey(t, a, "Stager") })
	procs, base := startSolo(t, t.TempDir(), append(s3Flags(gate.url, direct), append([]string{"--allow-private-targets"}, quickRecovery...)...)...)

	r, dst := jsonObject(t, "POST", base+"/storage/destinations", secret, map[string]any{
		"endpoint": srv.Endpoint, "secure": false, "region": srv.Region, "bucket": customer, "path_style": true,
		"access_key_id": srv.AccessKey, "secret_access_key": srv.SecretKey})
	if r.status != 201 {
		t.Fatalf("create destination: %d %s", r.status, r.body)
	}
	if r = call(t, "POST", base+"/storage/destinations/"+dst["id"].(string)+"/verify", secret, nil); r.status != 200 {
		t.Fatalf("verify: %d %s", r.status, r.body)
	}
	r = post(t, base+"/watermarks/images?storage_key=staged/one.jpg&storage_destination_id="+dst["id"].(string), secret, "", photo(t, 400, 300, 78), `{"stage":1}`)
	if r.status != 200 {
		t.Fatalf("embed: %d %s", r.status, r.body)
	}
	result, delivery, asset := r.body, r.header.Get("X-Storage-Delivery-ID"), r.header.Get("X-Asset-ID")
	select {
	case <-gate.held:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the hosted copy's removal never started\n%s", procs.List[0].Tail(30))
	}
	if _, del := jsonObject(t, "GET", base+"/storage/deliveries/"+delivery, secret, nil); del["status"] != "stored" {
		t.Fatalf("while the removal is held the delivery is %v, want stored", del)
	}
	if _, as := jsonObject(t, "GET", base+"/assets/"+asset, secret, nil); as["staging_deleted_at"] == nil || as["file_expires_at"] != nil {
		t.Fatalf("while the removal is held the asset is %v", as)
	}
	if staged := stagedCopies(t, srv, direct.Bucket, result); len(staged) != 1 {
		t.Fatalf("while the removal is held the cluster holds %d copies of the result, want 1", len(staged))
	}
	if err := procs.List[0].Kill(); err != nil {
		t.Fatal(err)
	}
	gate.release()
	rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer rcancel()
	if err := procs.List[0].Restart(rctx); err != nil {
		t.Fatal(err)
	}
	// The restarted node repeats the removal at its first sweep (every second with quickRecovery) after the
	// dead one's sweeper lease lapsed (4 s with quickRecovery, 30 s by default).
	deadline := time.Now().Add(90 * time.Second)
	for len(stagedCopies(t, srv, direct.Bucket, result)) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the hosted copy was never removed after the restart\n%s", procs.List[0].Tail(30))
		}
		time.Sleep(200 * time.Millisecond) // polling the bucket; the deadline bounds it
	}
	var objects []string
	for obj := range srv.Client().ListObjects(context.Background(), customer, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		objects = append(objects, obj.Key)
	}
	if len(objects) != 1 || objects[0] != "staged/one.jpg" {
		t.Fatalf("the customer bucket holds %v, want staged/one.jpg only", objects)
	}
	if got := call(t, "GET", base+"/assets/"+asset+"/content", secret, nil); got.status != 200 || !bytes.Equal(got.body, result) {
		t.Fatalf("the asset's download after the restart: %d", got.status)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer scancel()
	if err := procs.List[0].Stop(sctx); err != nil {
		t.Fatal(err)
	}
}
