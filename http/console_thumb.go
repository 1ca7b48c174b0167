package http

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"time"

	"golang.org/x/image/draw"

	"filigrane/actors"
	"filigrane/codec/imageio"
	"filigrane/http/console"
)

// Console thumbnails (http/console/thumbnails.go owns their route, cache and concurrency): the asset lookup
// and the decoding live here, beside the asset routes, so that the console reads assets and files the same
// way the API does.

const (
	// thumbHeadBytes is read first to estimate the decode's memory before the whole file is read.
	thumbHeadBytes = 64 << 10
	// thumbMaxBytes bounds the files previewed: larger images show no preview (the download still works).
	thumbMaxBytes = 64 << 20
	// thumbBudgetWait is how long a thumbnail waits for decode memory before answering busy: thumbnails
	// never hold up jobs for long.
	thumbBudgetWait = 2 * time.Second
)

// consoleThumbnail implements console.Config.Thumbnail.
func (s *Server) consoleThumbnail(ctx context.Context, m console.Member, assetID string) (string, func(context.Context) ([]byte, error), error) {
	as, _, err := s.assets().Lookup(ctx, m.OrgID, assetID)
	if errors.Is(err, actors.ErrAssetNotFound) {
		return "", nil, console.ErrNoThumbnail
	}
	if err != nil {
		return "", nil, fmt.Errorf("thumbnail of %s: %w", assetID, err)
	}
	if as.MediaType != "image" || !as.FileAvailable(s.cfg.Clock.Now()) || as.SizeBytes <= 0 || as.SizeBytes > thumbMaxBytes {
		return "", nil, console.ErrNoThumbnail
	}
	render := func(c context.Context) ([]byte, error) { return s.renderThumbnail(c, as.BlobKey, as.SizeBytes) }
	return as.SHA256, render, nil
}

// renderThumbnail reads the file's header, reserves the decode's memory (and the file's) in the node's
// decode budget, then decodes, scales and encodes.
func (s *Server) renderThumbnail(ctx context.Context, key string, size int64) ([]byte, error) {
	head, err := s.readBlob(ctx, key, 0, min(size, thumbHeadBytes))
	if err != nil {
		return nil, err
	}
	cost, err := imageio.EstimateCost(head)
	if err != nil {
		return nil, console.ErrNoThumbnail // not an image we read: no preview
	}
	if int64(cost.Width)*int64(cost.Height) > imageio.DefaultMaxPixels {
		return nil, console.ErrNoThumbnail
	}
	if budget := s.cfg.Media.Budget; budget != nil {
		wait, cancel := context.WithTimeout(ctx, thumbBudgetWait)
		release, err := budget.Acquire(wait, cost.Decode+size)
		cancel()
		switch {
		case errors.Is(err, actors.ErrDecodeTooLarge):
			return nil, console.ErrNoThumbnail
		case err != nil:
			return nil, console.ErrThumbnailBusy
		}
		defer release()
	}
	data := head
	if int64(len(head)) < size {
		if data, err = s.readBlob(ctx, key, 0, size); err != nil {
			return nil, err
		}
	}
	pic, err := imageio.DecodeBytesContext(ctx, data, imageio.Limits{MaxBytes: thumbMaxBytes})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, console.ErrNoThumbnail
	}
	data = nil // the encoded file is no longer needed while scaling
	b := pic.Image.Bounds()
	w, h := b.Dx(), b.Dy()
	if w > console.ThumbnailSize || h > console.ThumbnailSize {
		if w >= h {
			w, h = console.ThumbnailSize, max(1, h*console.ThumbnailSize/w)
		} else {
			w, h = max(1, w*console.ThumbnailSize/h), console.ThumbnailSize
		}
	}
	dst := image.NewNRGBA(image.Rect(0, 0, w, h))
	// BiLinear widens its kernel when shrinking, so a large photo does not alias into noise.
	draw.BiLinear.Scale(dst, dst.Bounds(), pic.Image, b, draw.Src, nil)
	var out bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&out, dst); err != nil {
		return nil, fmt.Errorf("encode thumbnail: %w", err)
	}
	return out.Bytes(), nil
}

// readBlob reads length bytes of a blob from offset.
func (s *Server) readBlob(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	r, err := s.cfg.Blobs.Get(ctx, key, offset, length)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	defer r.Close()
	b := make([]byte, length)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return b, nil
}
