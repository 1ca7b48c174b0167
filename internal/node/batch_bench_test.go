package node_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"filigrane/bench/batchbench"
	"filigrane/cluster/clustertest"
)

// TestBatchBenchCluster measures bench/README.md's batch on three `filigrane serve` processes sharing a
// versitygw bucket (one worker each): create through node 0, PUTs to its upload host, start, poll and
// download the archive through node 1. Set FILIGRANE_BATCH_BENCH=1 to run it.
func TestBatchBenchCluster(t *testing.T) {
	t.Parallel()
	if os.Getenv("FILIGRANE_BATCH_BENCH") == "" {
		t.Skip("set FILIGRANE_BATCH_BENCH=1 to measure the three-node batch")
	}
	c := startCluster(t, 3, clustertest.StableDetection())
	const items = 100
	file := batchbench.Image(1000, 1000, 1)
	do := func(method, url string, body []byte, hdr map[string]string) (int, []byte) {
		req, _ := http.NewRequest(method, url, bytes.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	key := map[string]string{"X-API-Key": c.secret}
	t0 := time.Now()
	var parts []string
	for i := 0; i < items; i++ {
		parts = append(parts, fmt.Sprintf(`{"filename":"img%03d.jpg","size":%d,"data":{"i":%d}}`, i, len(file), i))
	}
	st, body := do("POST", c.base(0)+"/watermarks/batches", []byte(`{"archive":true,"items":[`+strings.Join(parts, ",")+`]}`),
		map[string]string{"X-API-Key": c.secret, "Content-Type": "application/json", "Idempotency-Key": "bench-cluster-1"})
	if st != 201 {
		t.Fatalf("create: %d %s", st, body)
	}
	var b struct {
		BatchID string `json:"batch_id"`
		Items   []struct {
			Upload struct{ URL string } `json:"upload"`
		} `json:"items"`
	}
	_ = json.Unmarshal(body, &b)
	create := time.Since(t0)
	t1 := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, it := range b.Items {
		wg.Add(1)
		go func(url string) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if st, body := do("PUT", url, file, nil); st != 200 {
				t.Errorf("PUT: %d %s", st, body)
			}
		}(it.Upload.URL)
	}
	wg.Wait()
	puts := time.Since(t1)
	t2 := time.Now()
	if st, body := do("POST", c.base(1)+"/watermarks/batches/"+b.BatchID+"/start", nil, key); st != 202 {
		t.Fatalf("start: %d %s", st, body)
	}
	for {
		st, body := do("GET", c.base(2)+"/watermarks/batches/"+b.BatchID, nil, key)
		var s struct {
			Status string         `json:"status"`
			Counts map[string]int `json:"counts"`
		}
		_ = json.Unmarshal(body, &s)
		if st != 200 && st != 429 {
			t.Fatalf("poll: %d %s", st, body)
		}
		if s.Status == "completed" || s.Status == "failed" {
			if s.Counts["succeeded"] != items {
				t.Fatalf("ended %s with %v", s.Status, s.Counts)
			}
			break
		}
		if time.Since(t2) > 10*time.Minute {
			t.Fatalf("not done after 10 minutes: %s", body)
		}
		time.Sleep(500 * time.Millisecond)
	}
	run := time.Since(t2)
	t3 := time.Now()
	st, zip := do("GET", c.base(1)+"/watermarks/batches/"+b.BatchID+"/archive", nil, key)
	if st != 200 || !bytes.HasPrefix(zip, []byte("PK")) {
		t.Fatalf("archive: %d", st)
	}
	t.Logf("3 nodes, 1 worker each: create %v, %d PUTs %v, start to completed %v (%.2f items/s), archive %d bytes in %v; end to end %v",
		create, items, puts, run, float64(items)/run.Seconds(), len(zip), time.Since(t3), time.Since(t0))
}
