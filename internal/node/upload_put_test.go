package node_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"filigrane/actors"
)

// startPut opens a PUT of size bytes to a signed URL and sends only the first part of its body; the
// returned connection sends the rest.
func startPut(t *testing.T, signed string, size int, first []byte) net.Conn {
	t.Helper()
	u, err := url.Parse(signed)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, u.Host)
	head := fmt.Sprintf("PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Type: image/png\r\nContent-Length: %d\r\n\r\n", u.RequestURI(), u.Host, size)
	if _, err := c.Write(append([]byte(head), first...)); err != nil {
		t.Fatal(err)
	}
	return c
}

// uploadPut reads the PUT lease of an upload from the node's store.
func uploadPut(t *testing.T, f *fixture, id string) *actors.UploadPut {
	t.Helper()
	u, _, err := actors.Uploads{Store: f.n.Store(), Clock: f.clk}.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return u.Put
}

// waitPut waits until the upload's PUT lease is held (want true) or released (false). The deadline only
// bounds a broken server.
func waitPut(t *testing.T, f *fixture, id string, want bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for (uploadPut(t, f, id) != nil) != want {
		if time.Now().After(deadline) {
			t.Fatalf("upload %s: PUT lease held=%v, want %v", id, !want, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestUploadOnePutAtATime: while one PUT streams its body, a second PUT to the same URL is refused at once
// with 409 upload_in_use and stores nothing; the first PUT then completes.
func TestUploadOnePutAtATime(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	body := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB
	u := createUpload(t, f, f.dev.Secret, "detect", "x.png", len(body))
	first := startPut(t, u.Upload.URL, len(body), body[:100<<10])
	waitPut(t, f, u.UploadID, true)
	for deadline := time.Now().Add(15 * time.Second); uploadFiles(t, f) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first PUT never staged its body")
		}
	}

	for range 3 {
		r := putFile(t, u.Upload.URL, body, putOpts{})
		wantProblem(t, "second PUT", r, 409, "upload_in_use")
	}
	// Only the first PUT's staging file exists.
	if n := uploadFiles(t, f); n != 1 {
		t.Fatalf("%d upload files while one PUT streams, want 1", n)
	}

	if _, err := first.Write(body[100<<10:]); err != nil {
		t.Fatal(err)
	}
	_ = first.SetReadDeadline(time.Now().Add(15 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(first), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || decodeUpload(t, response{status: 200, body: b}).Status != "received" {
		t.Fatalf("first PUT: %d %s", res.StatusCode, b)
	}
	if uploadPut(t, f, u.UploadID) != nil {
		t.Fatal("a received upload still carries a PUT lease")
	}
	if n := uploadFiles(t, f); n != 1 {
		t.Fatalf("%d upload files after the PUT, want 1", n)
	}
	// The file is the body that was sent.
	g := getUpload(t, f, f.dev.Secret, u.UploadID)
	if g.Status != "received" || g.Size != int64(len(body)) {
		t.Fatalf("after the PUT: %+v", g)
	}
	wantProblem(t, "PUT after receipt", putFile(t, u.Upload.URL, body, putOpts{}), 409, "upload_already_received")
}

// TestUploadBrokenPutLeavesNothing: a PUT whose client goes away mid-body leaves no file behind and frees
// the upload for the next PUT at once.
func TestUploadBrokenPutLeavesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	body := bytes.Repeat([]byte{7}, 300<<10)
	u := createUpload(t, f, f.dev.Secret, "detect", "x.png", len(body))
	c := startPut(t, u.Upload.URL, len(body), body[:150<<10])
	waitPut(t, f, u.UploadID, true)
	c.Close()
	waitPut(t, f, u.UploadID, false)
	if n := uploadFiles(t, f); n != 0 {
		t.Fatalf("a broken PUT left %d files", n)
	}
	if g := getUpload(t, f, f.dev.Secret, u.UploadID); g.Status != "pending" {
		t.Fatalf("after a broken PUT: %+v", g)
	}
	if r := putFile(t, u.Upload.URL, body, putOpts{}); r.status != 200 {
		t.Fatalf("PUT after a broken one: %d %s", r.status, r.body)
	}
}

// TestUploadDeadPutLeaseLapses: a PUT whose node died holds the upload only until its lease runs out.
func TestUploadDeadPutLeaseLapses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	body := bytes.Repeat([]byte{9}, 4096)
	u := createUpload(t, f, f.dev.Secret, "detect", "x.png", len(body))
	// The record as a node that crashed mid-PUT leaves it.
	if _, err := (actors.Uploads{Store: f.n.Store(), Clock: f.clk}).Update(context.Background(), u.UploadID,
		func(up *actors.Upload, now time.Time) error {
			return up.BeginPut("crashed-node", actors.PutHolder{}, now, actors.UploadPutLease)
		}); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, "PUT during a dead PUT's lease", putFile(t, u.Upload.URL, body, putOpts{}), 409, "upload_in_use")
	f.clk.Advance(actors.UploadPutLease - time.Second)
	wantProblem(t, "PUT a second before the lease ends", putFile(t, u.Upload.URL, body, putOpts{}), 409, "upload_in_use")
	f.clk.Advance(time.Second)
	if r := putFile(t, u.Upload.URL, body, putOpts{}); r.status != 200 {
		t.Fatalf("PUT after the lease lapsed: %d %s", r.status, r.body)
	}
	if n := uploadFiles(t, f); n != 1 {
		t.Fatalf("%d upload files, want 1", n)
	}
}
