// Package batchbench measures a batch end to end against a node started in this process: create a batch of
// N images, PUT each file to its signed URL, start it, wait for it to complete and download its archive,
// timing each phase. It is a measuring harness, not part of the server.
package batchbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/internal/admin"
	"filigrane/internal/clock"
	"filigrane/internal/node"
	"filigrane/persistence/pebblestore"
)

// Result is one measured batch.
type Result struct {
	Items, Workers                          int
	FileBytes, ArchiveBytes                 int64
	Create, Upload, Run, Download, EndToEnd time.Duration
	Succeeded                               int
}

// Image returns a w x h JPEG with smooth content and noise, like a photo.
func Image(w, h int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			n := r.NormFloat64() * 5
			c := func(v float64) uint8 { return uint8(max(0, min(255, v+n))) }
			img.Set(x, y, color.NRGBA{c(60 + 120*float64(x)/float64(w)), c(80 + 90*float64(y)/float64(h)), c(110 + 40*float64(x+y)/float64(w+h)), 255})
		}
	}
	var b bytes.Buffer
	_ = jpeg.Encode(&b, img, &jpeg.Options{Quality: 90})
	return b.Bytes()
}

// Run starts a node with workers workers on dir (empty), creates an organization on the enterprise plan
// offline, and runs one batch of items copies of file (each with its own data) through it.
func Run(ctx context.Context, dir string, items, workers int, file []byte) (Result, error) {
	res := Result{Items: items, Workers: workers, FileBytes: int64(len(file))}
	var key string
	if err := func() error {
		store, err := pebblestore.Open(node.Layout{Root: dir}.StoreDir(), zerolog.Nop())
		if err != nil {
			return err
		}
		defer store.Close()
		a := admin.Admin{Store: store, Clock: clock.System{}, Catalog: actors.DefaultCatalog()}
		st, err := a.CreateOrg(ctx, "bench", "enterprise", int64(items)*4)
		if err != nil {
			return err
		}
		m, err := a.AddMember(ctx, st.ID, "bench", actors.RoleOwner)
		if err != nil {
			return err
		}
		key, _, err = a.CreateKey(ctx, actors.NewKeySpec{OrgID: st.ID, MemberID: m, Scopes: actors.AllScopes()})
		return err
	}(); err != nil {
		return res, fmt.Errorf("create organization: %w", err)
	}
	n, err := node.Start(ctx, node.Config{DataDir: dir, APIAddr: "127.0.0.1:0", UploadAddr: "127.0.0.1:0",
		NodeName: "batchbench", Logger: zerolog.Nop(), Workers: workers})
	if err != nil {
		return res, fmt.Errorf("start node: %w", err)
	}
	defer n.Close(context.WithoutCancel(ctx))
	base := "http://" + n.APIAddr()
	client := &http.Client{Timeout: 5 * time.Minute}
	do := func(method, url string, body []byte, hdr map[string]string) (int, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		r, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer r.Body.Close()
		b, err := io.ReadAll(r.Body)
		return r.StatusCode, b, err
	}
	authed := map[string]string{"X-API-Key": key, "Content-Type": "application/json", "Idempotency-Key": "bench-batch-1"}

	t0 := time.Now()
	var parts []string
	for i := 0; i < items; i++ {
		parts = append(parts, fmt.Sprintf(`{"filename":"img%03d.jpg","size":%d,"data":{"i":%d}}`, i, len(file), i))
	}
	status, body, err := do("POST", base+"/watermarks/batches", []byte(`{"archive":true,"items":[`+strings.Join(parts, ",")+`]}`), authed)
	if err != nil || status != 201 {
		return res, fmt.Errorf("create: %d %s %v", status, body, err)
	}
	var b struct {
		BatchID string `json:"batch_id"`
		Items   []struct {
			Upload struct{ URL string } `json:"upload"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return res, err
	}
	res.Create = time.Since(t0)

	t1 := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, items)
	sem := make(chan struct{}, 8)
	for _, it := range b.Items {
		wg.Add(1)
		go func(url string) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if st, body, err := do("PUT", url, file, nil); err != nil || st != 200 {
				errs <- fmt.Errorf("PUT: %d %s %v", st, body, err)
			}
		}(it.Upload.URL)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return res, err
	}
	res.Upload = time.Since(t1)

	t2 := time.Now()
	if st, body, err := do("POST", base+"/watermarks/batches/"+b.BatchID+"/start", nil, map[string]string{"X-API-Key": key}); err != nil || st != 202 {
		return res, fmt.Errorf("start: %d %s %v", st, body, err)
	}
	for {
		st, body, err := do("GET", base+"/watermarks/batches/"+b.BatchID, nil, map[string]string{"X-API-Key": key})
		if err != nil || st != 200 {
			return res, fmt.Errorf("poll: %d %v", st, err)
		}
		var s struct {
			Status string         `json:"status"`
			Counts map[string]int `json:"counts"`
		}
		_ = json.Unmarshal(body, &s)
		if s.Status == "completed" || s.Status == "failed" {
			res.Succeeded = s.Counts["succeeded"]
			break
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	res.Run = time.Since(t2)

	t3 := time.Now()
	st, zip, err := do("GET", base+"/watermarks/batches/"+b.BatchID+"/archive", nil, map[string]string{"X-API-Key": key})
	if err != nil || st != 200 || !bytes.HasPrefix(zip, []byte("PK")) {
		return res, fmt.Errorf("archive: %d %v", st, err)
	}
	res.Download = time.Since(t3)
	res.ArchiveBytes = int64(len(zip))
	res.EndToEnd = time.Since(t0)
	if res.Succeeded != items {
		return res, errors.New("not every item succeeded")
	}
	return res, nil
}
