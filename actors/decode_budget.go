package actors

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// DecodeBudget is a node's memory for decoding and analysing images and for parsing and analysing PDFs, in
// bytes. Every decode or parse (a worker's job, a synchronous detection or a PDF's probe at the edge) reserves
// its estimated peak before reading the file and gives it back
// when done, so that concurrent large files queue (jobs) or are turned away with 503 (synchronous requests)
// instead of exhausting the node's memory. The reservation is first come, first served.
type DecodeBudget struct {
	sem      *semaphore.Weighted
	capacity int64
	waiting  atomic.Int64 // reservations in Acquire, not yet answered
}

// Errors of DecodeBudget.Acquire.
var (
	// ErrDecodeTooLarge: the request needs more than the whole budget; it can never run on this node.
	ErrDecodeTooLarge = errors.New("decode needs more memory than the node's decode budget")
	// ErrDecodeBusy: the wait for memory ended (its context) before enough was free.
	ErrDecodeBusy = errors.New("decode memory is in use")
)

// MinDecodeMemory is the smallest default budget: one 40-megapixel embed.
const MinDecodeMemory int64 = 1 << 30

// NewDecodeBudget returns a budget of capacity bytes; 0 or less takes DefaultDecodeMemory.
func NewDecodeBudget(capacity int64) *DecodeBudget {
	if capacity <= 0 {
		capacity = DefaultDecodeMemory()
	}
	return &DecodeBudget{sem: semaphore.NewWeighted(capacity), capacity: capacity}
}

// Capacity is the budget's size in bytes.
func (b *DecodeBudget) Capacity() int64 { return b.capacity }

// Acquire reserves n bytes, waiting until ctx ends; call release when the decoded image is no longer used.
func (b *DecodeBudget) Acquire(ctx context.Context, n int64) (release func(), err error) {
	if n > b.capacity {
		return nil, fmt.Errorf("needs %d MB, the budget is %d MB: %w", mb(n), mb(b.capacity), ErrDecodeTooLarge)
	}
	n = max(n, 1)
	b.waiting.Add(1)
	err = b.sem.Acquire(ctx, n)
	b.waiting.Add(-1)
	if err != nil {
		return nil, fmt.Errorf("waiting for %d MB of decode memory: %w (%w)", mb(n), ErrDecodeBusy, err)
	}
	return func() { b.sem.Release(n) }, nil
}

// Waiting is how many reservations are in Acquire at this moment (waiting for memory, or about to be
// answered): what a test or an operator reads to see work queued behind the budget.
func (b *DecodeBudget) Waiting() int64 { return b.waiting.Load() }

func mb(n int64) int64 { return (n + 1<<20 - 1) >> 20 }

// DefaultDecodeMemory is the budget a node takes when none is configured: half the memory available to the
// process (the cgroup limit when there is one, else MemAvailable of /proc/meminfo), at least MinDecodeMemory;
// 4 GiB where neither can be read.
func DefaultDecodeMemory() int64 {
	avail := memoryAvailable()
	if avail <= 0 {
		return 4 << 30
	}
	return max(avail/2, MinDecodeMemory)
}

// memoryAvailable returns the memory this process may use, or 0 when unknown.
func memoryAvailable() int64 {
	var avail int64
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemAvailable:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					avail = kb << 10
				}
			}
		}
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if limit, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && (avail == 0 || limit < avail) {
			avail = limit
		}
	}
	return avail
}

// ParseByteSize reads a size such as "4GiB", "512MiB", "2G", "750M" or a plain number of bytes (the
// --decode-memory flag).
func ParseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit (GiB, MiB, G, M)", s)
	}
	return n * mult, nil
}
