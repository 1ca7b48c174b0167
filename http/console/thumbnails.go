package console

import (
	"container/list"
	"context"
	"errors"
	"strings"
	"sync"
)

// Thumbnails: the assets page shows a small preview of each image asset, made on the server so that the
// browser does not download every full-size file. Their cost is bounded three ways: the file is decoded
// within the node's decode budget (Config.Thumbnail waits briefly for it, then gives up: 503), at most
// thumbRenders are made at once, and made ones are kept (thumbCached, least recently used first out) under
// the file's SHA-256, so a page shown again costs a lookup. The browser also keeps them (ETag, private cache).

// Errors Config.Thumbnail returns.
var (
	// ErrNoThumbnail: no such asset in the organization, not an image, or its file is no longer hosted.
	ErrNoThumbnail = errors.New("console: no thumbnail for this asset")
	// ErrThumbnailBusy: the decode memory or the render slots stayed in use; try again shortly.
	ErrThumbnailBusy = errors.New("console: thumbnails are busy")
)

// ThumbnailSize is the longest side of a thumbnail, in pixels (the page shows 64 CSS pixels; this is sharp on
// screens of up to 2.5 device pixels per CSS pixel).
const ThumbnailSize = 160

const (
	thumbRenders = 2
	thumbCached  = 512 // about 30 kB each
)

// thumbs is the console's cache of made thumbnails and the bound on making them.
type thumbs struct {
	slots chan struct{}
	mu    sync.Mutex
	order *list.List // of string tags, most recent first
	items map[string]*list.Element
	data  map[string][]byte
}

func newThumbs() *thumbs {
	return &thumbs{slots: make(chan struct{}, thumbRenders), order: list.New(), items: map[string]*list.Element{}, data: map[string][]byte{}}
}

func (t *thumbs) get(tag string) ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.items[tag]
	if !ok {
		return nil, false
	}
	t.order.MoveToFront(e)
	return t.data[tag], true
}

func (t *thumbs) put(tag string, b []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.items[tag]; ok {
		return
	}
	t.items[tag] = t.order.PushFront(tag)
	t.data[tag] = b
	for t.order.Len() > thumbCached {
		last := t.order.Back()
		old := last.Value.(string)
		t.order.Remove(last)
		delete(t.items, old)
		delete(t.data, old)
	}
}

// render makes a thumbnail within the bound on concurrent renders; ctx ends the wait.
func (t *thumbs) render(ctx context.Context, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	select {
	case t.slots <- struct{}{}:
		defer func() { <-t.slots }()
	case <-ctx.Done():
		return nil, ErrThumbnailBusy
	}
	return fn(ctx)
}

// thumbnail answers GET /console/thumbnails/<asset id>: a PNG of at most ThumbnailSize pixels a side.
func (c *Console) thumbnail(r *request, assetID string) {
	if c.cfg.Thumbnail == nil || assetID == "" || strings.Contains(assetID, "/") {
		c.errorPage(r.ctx, 404, "There is no such thumbnail.")
		return
	}
	tag, render, err := c.cfg.Thumbnail(r.c, r.member(), assetID)
	if errors.Is(err, ErrNoThumbnail) {
		c.errorPage(r.ctx, 404, "There is no thumbnail for this asset.")
		return
	}
	if err != nil {
		c.unavailablePage(r.ctx, err)
		return
	}
	h := &r.ctx.Response.Header
	etag := `"thumb-` + tag + `"`
	h.Set("ETag", etag)
	// Private: the thumbnail is the organization's; an hour: the tag changes with the file.
	h.Set("Cache-Control", "private, max-age=3600")
	if string(r.ctx.Request.Header.Peek("If-None-Match")) == etag {
		r.ctx.SetStatusCode(304)
		return
	}
	b, ok := c.thumbs.get(tag)
	if !ok {
		b, err = c.thumbs.render(r.c, render)
		switch {
		case errors.Is(err, ErrThumbnailBusy):
			h.Set("Cache-Control", "no-store")
			h.Set("Retry-After", "2")
			c.errorPage(r.ctx, 503, "Thumbnails are busy. Try again in a moment.")
			return
		case errors.Is(err, ErrNoThumbnail):
			h.Set("Cache-Control", "no-store")
			c.errorPage(r.ctx, 404, "There is no thumbnail for this asset.")
			return
		case err != nil:
			h.Set("Cache-Control", "no-store")
			c.unavailablePage(r.ctx, err)
			return
		}
		c.thumbs.put(tag, b)
	}
	r.ctx.SetStatusCode(200)
	r.ctx.SetContentType("image/png")
	r.ctx.SetBody(b)
}
