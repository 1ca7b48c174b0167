package pdfbench

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Markdown writes the report tables.
func (r *Result) Markdown(w io.Writer) {
	fmt.Fprintln(w, "| attack | documents: exact id (structure, else rendering) | pages ≥20% non-white: exact id from rendering | sparse/text pages: exact id from rendering |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, at := range Attacks {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", at, r.DocExact[at], r.PageDense[at], r.PageSparse[at])
	}
	fmt.Fprintf(w, "\nWrong ids: %d. False positives (rendered detection of unmarked pages): %d of %d pages, %d of %d documents.\n",
		r.WrongIDs, r.FPPages, r.FPPagesN, r.FPDocs, r.FPDocsN)
	fmt.Fprintf(w, "\nOutput size / input size: median %.2f, max %.2f.\n", r.SizeRatioMedian, r.SizeRatioMax)
	overlays := map[string]int{}
	for _, d := range r.Docs {
		if d.Overlay != "" {
			overlays[d.Overlay]++
		}
	}
	fmt.Fprintf(w, "\nOverlay drawn with page images: %d documents, tiles: %d, mixed: %d.\n", overlays["page images"], overlays["tiles"], overlays["mixed"])
	if r.EmbedPages > 0 {
		fmt.Fprintf(w, "\nSpeed: embed %.0f pages/s wall, %.0f pages per CPU-second (%s, %d pages); detect of the intact file %.0f ms wall (best of 3); detect by rendering at 150 dpi, one renderer process: %.1f pages/s wall, %.1f pages per CPU-second (renderer included; %d pages).\n",
			r.EmbedPagesPerSec, r.EmbedPagesPerCPUSec, r.EmbedDoc, r.EmbedPages, r.DetectIntactMs, r.DetectRenderPagesPerS, r.DetectRenderPagesPerCPUSec, r.DetectRenderPages)
	}
	fmt.Fprintln(w, "\n| document | kind | pages | dense pages | bytes in → out | overlay | embed ms | rendered: per attack, pages with the exact id |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, d := range r.Docs {
		keys := make([]string, 0, len(d.Rendered))
		for k := range d.Rendered {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return index(keys[i]) < index(keys[j]) })
		var parts []string
		for _, k := range keys {
			parts = append(parts, k+" "+d.Rendered[k])
		}
		if d.Err != "" {
			parts = append(parts, "error: "+d.Err)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d → %d | %s | %.0f | %s |\n", d.Name, d.Kind, d.Pages, d.DensePages, d.InBytes,
			d.OutBytes, d.Overlay, d.EmbedMs, strings.Join(parts, ", "))
	}
}

func index(at string) int {
	for i, a := range Attacks {
		if a == at {
			return i
		}
	}
	return len(Attacks)
}
