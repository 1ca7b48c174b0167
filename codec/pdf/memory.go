package pdf

import (
	"context"
	"fmt"
	"math"
	"os"

	"filigrane/codec"
)

// Memory is what processing one file holds in this process at its peak, estimated before parsing.
type Memory struct {
	Bytes    int64 // the estimate
	File     int64 // the part of Bytes the file causes (the rest: a detection's pages under analysis)
	Page     int64 // a detection's: one page under analysis at the largest size the renderer draws (Bytes has one per render worker)
	Objects  int64 // objects the parser will read (objcount.go)
	Inflated int64 // bytes its object and cross-reference streams inflate to
	Tokens   int64 // token starts in the file and its inflated object streams (tokenCounter)
	Size     int64 // the file's bytes
	// Metadata is what the metadata streams decode to, as an embed's or a probe's edits and validation of them
	// may hold it (countMetadata: at most maxMetadataBytes); a detection reads none.
	Metadata int64
}

// EstimateMemory is an upper estimate of the memory this process holds at its peak while it probes, embeds
// or detects src: pdfcpu's model of the file, the overlay an embed writes, the pages a detection analyses.
// The renderer (mutool) is another process under its own address-space limit (Limits.RenderMemory) and is
// not counted. It reads the file once (the scan the parser's bounds run, objcount.go and objstm.go) and
// refuses what that scan refuses, with the same errors; for a detection of an encrypted file whose object
// streams the scan cannot count, it scans the decrypted copy the detection parses (decrypt.go).
func (a *Adapter) EstimateMemory(ctx context.Context, src string, detect bool) (Memory, error) {
	f := a.Prepare(src)
	defer f.Close()
	return f.EstimateMemory(ctx, detect)
}

// EstimateMemory is Adapter.EstimateMemory of the File's input.
func (f *File) EstimateMemory(ctx context.Context, detect bool) (Memory, error) {
	lim := f.a.Limits.withDefaults()
	st, err := os.Stat(f.src)
	if err != nil {
		return Memory{}, fmt.Errorf("pdf: %w", err)
	}
	if st.Size() > lim.MaxBytes {
		return Memory{}, refuse(CodeTooLarge, "the file has %d bytes, more than the limit of %d", st.Size(), lim.MaxBytes)
	}
	if detect {
		if q := f.quickMark(ctx); q.ok {
			// The detection reads the mark without parsing (quickStructural, in mutool's own process) and
			// renders nothing: what one operation holds whatever the file.
			return Memory{Bytes: memoryBase, File: memoryBase, Size: st.Size()}, nil
		}
	}
	scan, err := f.scan(f.src, lim)
	if detect && CodeOf(err) == CodeEncrypted {
		var dec string
		if dec, err = f.decrypted(ctx, lim); err == nil {
			scan, err = f.scan(dec, lim)
		}
	}
	if err != nil {
		return Memory{}, err
	}
	m := Memory{Objects: scan.objects(), Inflated: scan.inflated, Tokens: scan.tokens, Size: scan.size}
	m.File = memoryBase + memoryPerObject*m.Objects + memoryPerToken*m.Tokens + memoryPerByte*(m.Size+m.Inflated)
	if !detect {
		m.Metadata = scan.xmp
		m.File += memoryPerMetadataByte * m.Metadata
	}
	m.Bytes = m.File
	if detect {
		m.Page = pageMemory(lim.RenderMaxPixels + lim.RenderMaxPixels/8)
		m.Bytes += int64(lim.renderWorkers()) * m.Page
	}
	return m, nil
}

// The model's constants, fitted on the peak RSS of a process that runs one operation on one file (bench/pdfmem;
// the table is in docs/operations.md, "Decode budgets"), each an upper bound of what was measured:
//
//   - memoryBase: what one operation holds whatever the file (the overlay's images and the writer's buffers
//     of an embed; a one-page file took 20-23 MB of which 15 MB is the process itself);
//   - memoryPerObject: pdfcpu's model, per object it reads (2.8 kB a tiny object measured, at 100,000 and
//     at 199,990; real objects cost more, and that grows with their bytes and tokens: next);
//   - memoryPerToken: per token start (tokenCounter) of the file and of its inflated object streams: pdfcpu
//     builds an object of each token of an array or dictionary. Object streams inflating to 63 MB of one
//     array each took 19 bytes a byte of 0s (one token in 2 bytes), 24 of /a (2 in 3), 28 of <<>> (4 in 4)
//     and 38 of [] (2 in 2), up to 6.2 GB for a 246 kB file near the 256 MB inflation bound; the former
//     10 bytes a byte, tokens uncounted, estimated 2.4 GB for it. 40 a token estimated 888 MiB for 15.7 M tokens
//     of 0s just under MaxTokens, whose embed peaked at 1,014 MiB: 50 (1,038 MiB);
//   - memoryPerByte: per byte of the file and of its inflated object streams, which the model holds as
//     stream data and strings (63 MB of one string: 6.3 bytes a byte to embed).
const (
	memoryBase      = 48 << 20
	memoryPerObject = 3 << 10
	memoryPerToken  = 50
	memoryPerByte   = 8
	// memoryPerMetadataByte: per byte the metadata streams decode to (Memory.Metadata), which pdfcpu's validation
	// decodes and parses (the catalog's) and the embed's edits decode and copy (metadata.go).
	memoryPerMetadataByte = 8
)

// PageMemory bounds what a detection holds for one rendered w×h page while it analyses it: the renderer's gray
// bytes, their float32 copy and the detector's own memory (codec.DetectMemory). A Letter page at 150 dpi took
// about 55 MB a render worker, a 16 MP page 280 MB (estimate 350 MB). DetectReserving reserves it for each page
// as the page arrives.
func PageMemory(w, h int) int64 {
	return 5*int64(w)*int64(h) + codec.DetectMemory(w, h)
}

// pageMemory is PageMemory of a square page of px pixels, the shape estimated before the pages' sizes are known.
func pageMemory(px int) int64 {
	side := int(math.Ceil(math.Sqrt(float64(px))))
	return PageMemory(side, side)
}
