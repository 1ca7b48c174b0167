// Package uploadbench measures what a node holds in memory while a large file streams in through a signed
// upload URL: it starts a node in this process, declares a detect upload, PUTs the bytes from a generator
// (the client holds only a small buffer) and reads the process's peak resident set (VmHWM) and the Go heap
// around the upload. A node that buffered the file would show its size in both.
package uploadbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"filigrane/internal/node"
)

// Result is one measured upload.
type Result struct {
	Size    int64
	Elapsed time.Duration
	// RSSBefore is the resident set just before the PUT; PeakRSS the process's high-water mark during it
	// (VmHWM after resetting it through /proc/self/clear_refs; when the kernel refuses the reset, the
	// high-water mark since the process started).
	RSSBefore, PeakRSS int64
	PeakReset          bool
	// PeakHeap is the largest Go heap in use seen while sampling every 5 ms.
	PeakHeap uint64
}

// MiB renders bytes as mebibytes.
func MiB(n int64) float64 { return float64(n) / (1 << 20) }

// Run starts a node on dir, streams one detect upload of size bytes to it and measures the process.
func Run(ctx context.Context, dir string, size int64) (Result, error) {
	n, err := node.Start(ctx, node.Config{DataDir: dir, APIAddr: "127.0.0.1:0", UploadAddr: "127.0.0.1:0",
		NodeName: "uploadbench", Logger: zerolog.Nop(), Bootstrap: true, SweepInterval: -1, Workers: 1})
	if err != nil {
		return Result{}, fmt.Errorf("start node: %w", err)
	}
	defer n.Close(context.WithoutCancel(ctx))
	if n.DevOrg == nil {
		return Result{}, errors.New("the data directory was not empty: no development key")
	}
	putURL, err := declare(ctx, "http://"+n.APIAddr(), n.DevOrg.Secret, size)
	if err != nil {
		return Result{}, err
	}
	runtime.GC()
	debug.FreeOSMemory()
	res := Result{Size: size}
	res.RSSBefore, _ = procStatus("VmRSS")
	res.PeakReset = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				runtime.ReadMemStats(&ms)
				res.PeakHeap = max(res.PeakHeap, ms.HeapInuse)
			}
		}
	}()
	start := time.Now()
	err = put(ctx, putURL, size)
	res.Elapsed = time.Since(start)
	close(stop)
	wg.Wait()
	if err != nil {
		return res, err
	}
	res.PeakRSS, err = procStatus("VmHWM")
	return res, err
}

func declare(ctx context.Context, base, key string, size int64) (string, error) {
	body := fmt.Sprintf(`{"kind":"detect","filename":"bench.png","size":%d}`, size)
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/uploads", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("declare upload: %w", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 201 {
		return "", fmt.Errorf("declare upload: %d %s", res.StatusCode, b)
	}
	var u struct {
		Upload struct {
			URL string `json:"url"`
		} `json:"upload"`
	}
	if err := json.Unmarshal(b, &u); err != nil {
		return "", fmt.Errorf("declare upload: %w", err)
	}
	return u.Upload.URL, nil
}

// pattern is an endless, cheap, non-constant byte stream (so no layer can compress it away).
type pattern struct{ x uint64 }

func (p *pattern) Read(b []byte) (int, error) {
	for i := range b {
		p.x = p.x*6364136223846793005 + 1442695040888963407
		b[i] = byte(p.x >> 56)
	}
	return len(b), nil
}

func put(ctx context.Context, url string, size int64) error {
	req, _ := http.NewRequestWithContext(ctx, "PUT", url, io.LimitReader(&pattern{x: 1}, size))
	req.ContentLength = size
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("PUT: %w", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		return fmt.Errorf("PUT: %d %s", res.StatusCode, b)
	}
	return nil
}

// procStatus reads a "kB" field of /proc/self/status, in bytes.
func procStatus(field string) (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("read /proc/self/status: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse %s: %w", field, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}
