package cudacodec

import (
	"errors"
	"sync"
	"unsafe"

	"filigrane/gpu/cuda"
)

// pinnedBuffer is page-locked host memory: *cuda.HostBuffer on a device, Go memory in the pool's tests. Free
// unpins and frees it; Abandon frees it without the driver, for after the context is destroyed.
type pinnedBuffer interface {
	Bytes() []byte
	Free() error
	Abandon() error
}

// pixelPool lends page-locked buffers for decoders to write images into (accel.HostMemory), so that Load sends
// such an image to the device without copying it into its arena's staging buffer first, and keeps the buffers
// given back for later images: pinning memory (cuMemAllocHost) costs milliseconds for an image's 48 MB, and
// freeing it waits for the whole device. It owns the buffers it has made and knows which are lent (Load asks
// with lentAt); it does not know what is in them.
type pixelPool struct {
	alloc func(n int) (pinnedBuffer, error)
	// maxIdle and maxIdleBytes bound the buffers kept for reuse; a buffer given back beyond them is freed.
	maxIdle      int
	maxIdleBytes int

	mu        sync.Mutex
	idle      []pinnedBuffer
	idleBytes int
	lent      map[*byte]pinnedBuffer // by the address of the buffer's first byte
	closed    bool
}

// Bounds of the pixel buffers a Device keeps idle: enough for the 16 concurrent jobs of maxPooled's reasoning
// at 12 MP (48 MB each), and never more than 1 GiB of page-locked memory that the rest of the machine cannot
// use.
const (
	maxIdlePixelBuffers = 16
	maxIdlePixelBytes   = 1 << 30
)

func newPixelPool(alloc func(n int) (pinnedBuffer, error)) *pixelPool {
	return &pixelPool{alloc: alloc, maxIdle: maxIdlePixelBuffers, maxIdleBytes: maxIdlePixelBytes,
		lent: map[*byte]pinnedBuffer{}}
}

// lend returns n bytes of a pooled buffer (the smallest idle one that holds them) or of a new one, and the func
// that gives it back; nil when the pool is closed, n is not positive or the allocation fails (the caller then
// decodes into its own memory, and Load stages the image as before).
func (p *pixelPool) lend(n int) ([]byte, func()) {
	if n <= 0 {
		return nil, func() {}
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, func() {}
	}
	best := -1
	for i, b := range p.idle {
		if len(b.Bytes()) >= n && (best < 0 || len(b.Bytes()) < len(p.idle[best].Bytes())) {
			best = i
		}
	}
	var buf pinnedBuffer
	if best >= 0 {
		buf = p.idle[best]
		p.idle = append(p.idle[:best], p.idle[best+1:]...)
		p.idleBytes -= len(buf.Bytes())
	}
	p.mu.Unlock()
	if buf == nil {
		var err error
		if buf, err = p.alloc(n); err != nil {
			return nil, func() {}
		}
	}
	pix := buf.Bytes()
	p.mu.Lock()
	if p.closed { // closed while allocating
		p.mu.Unlock()
		buf.Abandon()
		return nil, func() {}
	}
	p.lent[&pix[0]] = buf
	p.mu.Unlock()
	var once sync.Once
	return pix[:n:n], func() { once.Do(func() { p.giveBack(buf) }) }
}

// giveBack keeps buf for later images, or frees it when the pool is full; a buffer given back after the pool
// closed is abandoned (its device's context is destroyed, or about to be, with the device).
func (p *pixelPool) giveBack(buf pinnedBuffer) {
	p.mu.Lock()
	delete(p.lent, &buf.Bytes()[0])
	n := len(buf.Bytes())
	closed := p.closed
	if !closed && len(p.idle) < p.maxIdle && p.idleBytes+n <= p.maxIdleBytes {
		p.idle = append(p.idle, buf)
		p.idleBytes += n
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	if closed {
		buf.Abandon()
		return
	}
	buf.Free()
}

// lentAt returns the lent buffer that holds all of pix, and pix's offset in it; ok is false when pix is not
// entirely inside one (Go memory, or a buffer given back).
func (p *pixelPool) lentAt(pix []byte) (buf pinnedBuffer, off int, ok bool) {
	if len(pix) == 0 {
		return nil, 0, false
	}
	start := uintptr(unsafe.Pointer(&pix[0]))
	p.mu.Lock()
	defer p.mu.Unlock()
	for first, b := range p.lent {
		base := uintptr(unsafe.Pointer(first))
		if start >= base && start-base+uintptr(len(pix)) <= uintptr(len(b.Bytes())) {
			return b, int(start - base), true
		}
	}
	return nil, 0, false
}

// close frees the idle buffers; buffers still lent are abandoned when they are given back (their memory stays
// valid until then: the caller may still be reading an image there).
func (p *pixelPool) close() error {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.idleBytes, p.closed = nil, 0, true
	p.mu.Unlock()
	var errs []error
	for _, b := range idle {
		errs = append(errs, b.Free())
	}
	return errors.Join(errs...)
}

// pooled is the page-locked bytes kept idle.
func (p *pixelPool) pooled() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idleBytes
}

// cudaPinned makes the pool's buffers for c: mapped here and registered (RegisterHost), not AllocHost's, so
// that an image decoded into one stays readable if the device closes while the job still holds it.
func cudaPinned(c *cuda.Context) func(n int) (pinnedBuffer, error) {
	return func(n int) (pinnedBuffer, error) { return c.RegisterHost(n) }
}
