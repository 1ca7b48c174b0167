package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"filigrane/codec"
	"filigrane/codec/pdf"
)

// isPDF selects the PDF adapter by the file's extension, as the service's upload filenames do.
func isPDF(path string) bool { return strings.EqualFold(filepath.Ext(path), ".pdf") }

func codecEmbedPDF(ctx context.Context, f *codecFlags, in, out string, id codec.ID, strength float64, asJSON bool,
	stdout, stderr io.Writer) int {
	if !isPDF(out) {
		fmt.Fprintf(stderr, "filigrane codec embed: a PDF is written as a PDF; name the output *.pdf, not %q\n", out)
		return 2
	}
	if strength < pdf.MinStrength || strength > pdf.MaxStrength {
		fmt.Fprintf(stderr, "filigrane codec embed: --darkening %g outside %g..%g\n", strength, pdf.MinStrength, pdf.MaxStrength)
		return 2
	}
	c, err := f.codec(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "filigrane codec embed:", err)
		return 2
	}
	a := &pdf.Adapter{Codec: c}
	rep, err := a.Embed(ctx, in, out, id, pdf.Options{Strength: strength})
	if err != nil {
		fmt.Fprintf(stderr, "filigrane codec embed: %s: %v\n", in, err)
		return 1
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"watermark_id": id.String(), "output": out, "report": rep})
		return 0
	}
	fmt.Fprintf(stdout, "watermark_id: %s\npages: %d\nbytes: %d -> %d\n", id, rep.Pages, rep.InBytes, rep.OutBytes)
	switch {
	case rep.PDFARemoved:
		fmt.Fprintf(stdout, "pdfa: the input declared PDF/A-%s; the output does not (the overlay's transparency breaks it)\n", rep.PDFA)
	case rep.PDFA != "":
		fmt.Fprintf(stdout, "pdfa: PDF/A-%s kept\n", rep.PDFA)
	}
	return 0
}

func codecDetectPDF(ctx context.Context, c *codec.Codec, in string, rendered bool, stdout, stderr io.Writer) int {
	a := &pdf.Adapter{Codec: c}
	detect := a.Detect
	if rendered {
		detect = a.DetectRendered
	}
	d, err := detect(ctx, in)
	if err != nil {
		fmt.Fprintf(stderr, "filigrane codec detect: %s: %v\n", in, err)
		return 1
	}
	if !d.Watermarked {
		d.WatermarkID = nil
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		fmt.Fprintln(stderr, "filigrane codec detect:", err)
		return 1
	}
	return 0
}
