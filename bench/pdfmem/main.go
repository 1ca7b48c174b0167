// Command pdfmem measures one PDF operation's peak memory next to codec/pdf's estimate of it
// (Adapter.EstimateMemory): run once per file and operation, it prints the estimate's inputs, the estimate, what
// the node reserves at its peak (for a detection: the file's part and the pages it reserved at once as they
// arrived, Adapter.DetectReserving) and the process's peak resident memory (VmHWM), the figures of
// docs/operations.md's "Decode budgets". It also writes the generated files measured there (-op gen). It shares nothing with what it measures beyond the
// adapter's public API, and uses the development key.
//
//	go run ./bench/pdfmem -op gen -n 199990 tiny.pdf
//	go run ./bench/pdfmem -op embed tiny.pdf
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"filigrane/codec"
	"filigrane/codec/pdf"
	"filigrane/codec/pdf/pdftest"
)

func main() {
	op := flag.String("op", "detect", "estimate, probe, embed, detect, render (detect skipping the structural mark) or gen")
	n := flag.Int("n", 0, "gen: tiny objects")
	pages := flag.Int("pages", 0, "gen: that many blank pages of -side points square instead of tiny objects")
	side := flag.Int("side", 612, "gen: page side in points")
	objstm := flag.Int("objstm", 0, "gen: that many pages instead, each alone in an object stream with a -junk entry of -mb MB")
	junkMB := flag.Int("mb", 60, "gen: MB of each page's junk entry")
	indirect := flag.Bool("indirect", false, "gen: each page's junk is an object alone in another object stream, named by a private entry of the page's annotation (what validation does not read but the writer writes: objstreams.go)")
	metadata := flag.Int("metadata", 0, "gen: that many Letter pages instead, the catalog's XMP and each page's of -xmpmb MB (Flate-compressed, each with a thumbnail)")
	xmpMB := flag.Float64("xmpmb", 4, "gen: MB of each XMP stream (-metadata)")
	xmpItems := flag.Bool("xmpitems", false, "gen: each XMP stream's bulk is keywords (dc:subject items of one letter) rather than a text")
	junk := flag.String("junk", "ints", "gen: the junk entry: string (a literal string), ints (an array of 0s), names (of /a), arrays (of []) or dicts (of <<>>), or nested (arrays, each the only element of the one before)")
	flag.Parse()
	src := flag.Arg(0)
	if *op == "gen" {
		data := tinyObjects(*n)
		switch {
		case *pages > 0:
			data = blankPages(*pages, *side)
		case *metadata > 0:
			data = metadataPages(*metadata, int(*xmpMB*(1<<20)), *xmpItems)
		case *objstm > 0:
			data = objectStreamPages(*objstm, *junkMB<<20, *junk, *indirect)
		}
		if err := os.WriteFile(src, data, 0o644); err != nil {
			fail(err)
		}
		return
	}
	c, err := codec.New([]byte(codec.DevelopmentKey))
	if err != nil {
		fail(err)
	}
	a := &pdf.Adapter{Codec: c}
	ctx := context.Background()
	est, err := a.EstimateMemory(ctx, src, *op == "detect" || *op == "render")
	if err != nil {
		fmt.Println("estimate:", err)
		return
	}
	reserved := est.Bytes // what the node reserves at its peak: all of the estimate, but for a detection's pages
	switch *op {
	case "estimate":
	case "probe":
		_, err = a.Probe(ctx, src)
	case "embed":
		dst := filepath.Join(os.TempDir(), "pdfmem-out.pdf")
		_, err = a.Embed(ctx, src, dst, codec.ID{}, pdf.Options{})
		os.Remove(dst)
	case "detect":
		// As the node does: the file's part is reserved before, each page's part as the page arrives.
		var mu sync.Mutex
		var held int64
		reserve := func(_ context.Context, n int64) (func(), error) {
			mu.Lock()
			defer mu.Unlock()
			held += n
			reserved = max(reserved, est.File+held)
			return func() {
				mu.Lock()
				held -= n
				mu.Unlock()
			}, nil
		}
		reserved = est.File
		_, err = a.DetectReserving(ctx, src, reserve)
	case "render":
		_, err = a.DetectRendered(ctx, src)
	}
	fmt.Printf("%s\t%s\tsize=%d\tobjects=%d\tinflated=%d\ttokens=%d\test=%dMB\treserved=%dMB\thwm=%s\terr=%v\n", *op, filepath.Base(src), est.Size,
		est.Objects, est.Inflated, est.Tokens, est.Bytes>>20, reserved>>20, hwm(), err)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "pdfmem:", err)
	os.Exit(1)
}

// hwm is the process's peak resident memory so far.
func hwm() string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			return strings.Join(strings.Fields(l)[1:], "")
		}
	}
	return "?"
}

// tinyObjects is a one-page document followed by n objects "<< /A 1 >>", each at its own offset.
func tinyObjects(n int) []byte {
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>"}
	for range n {
		objs = append(objs, "<< /A 1 >>")
	}
	return pdftest.Build(objs, "/Root 1 0 R")
}

// objectStreamPages is a document of k Letter pages, each page's dictionary alone in its own object stream
// with an entry /Junk of about each bytes (kind: a literal string of "a", an array of 0s, of /a, of empty arrays or of empty dictionaries), so
// that reading the page tree inflates every stream and parses every entry: what the parser holds for each byte
// its object streams inflate to, at its worst. With indirect, the junk is an object alone in an object stream of
// its own (at most 45 pages) that the page's annotation names in a private entry: only the writer reads it,
// and decodes it (objstreams.go).
func objectStreamPages(k, each int, kind string, indirect bool) []byte {
	var junk []byte
	switch kind {
	case "string":
		junk = append(append([]byte("("), bytes.Repeat([]byte("a"), each)...), ')')
	case "names":
		junk = append(append([]byte("["), bytes.Repeat([]byte("/a "), each/3)...), ']')
	case "arrays":
		junk = append(append([]byte("["), bytes.Repeat([]byte("[]"), each/2)...), ']')
	case "dicts":
		junk = append(append([]byte("["), bytes.Repeat([]byte("<<>>"), each/4)...), ']')
	case "nested":
		junk = append(bytes.Repeat([]byte("["), each/2), bytes.Repeat([]byte("]"), each/2)...)
	default:
		junk = append(append([]byte("["), bytes.Repeat([]byte("0 "), each/2)...), ']')
	}
	kids := make([]string, k)
	streamed := make([][]byte, k)
	for i := range k {
		kids[i] = fmt.Sprintf("%d 0 R", pdftest.FirstStreamedObject+i)
		if indirect {
			streamed[i] = fmt.Appendf(nil, "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Annots [<< /Type /Annot /Subtype /Text /Rect [0 0 9 9] /Junk %d 0 R >>] >>", pdftest.FirstStreamedObject+k+i)
			continue
		}
		streamed[i] = append(append([]byte("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Junk "), junk...), " >>"...)
	}
	if indirect {
		for range k {
			streamed = append(streamed, junk)
		}
	}
	return pdftest.ObjectStreams([]string{"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), k)}, streamed)
}

// metadataPages is a document of n Letter pages whose catalog and every page carry an XMP packet of about each
// bytes (Flate-compressed), each with a thumbnail, so that an embed decodes, edits and rewrites every one of them
// (codec/pdf's metadata.go): what its metadata costs at its most. The bulk of each packet is a description, or
// with items keywords of one letter each (which pdfcpu's validation parses into a list).
func metadataPages(n, each int, items bool) []byte {
	packet := func(title string) []byte {
		head := "<?xpacket begin='\ufeff' id='W5M0MpCehiHzreSzNTczkc9d'?>\n<x:xmpmeta xmlns:x='adobe:ns:meta/'>" +
			"<rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'><rdf:Description rdf:about=''" +
			" xmlns:xmp='http://ns.adobe.com/xap/1.0/' xmlns:xmpGImg='http://ns.adobe.com/xap/1.0/g/img/'" +
			" xmlns:dc='http://purl.org/dc/elements/1.1/'><xmp:CreateDate>2020-01-02T03:04:05Z</xmp:CreateDate>" +
			"<xmp:ModifyDate>2020-01-02T03:04:05Z</xmp:ModifyDate><dc:title><rdf:Alt><rdf:li xml:lang='x-default'>" + title +
			"</rdf:li></rdf:Alt></dc:title><xmp:Thumbnails><rdf:Alt><rdf:li rdf:parseType='Resource'><xmpGImg:image>/9j/4AAQ" +
			"</xmpGImg:image></rdf:li></rdf:Alt></xmp:Thumbnails><dc:description><rdf:Alt><rdf:li xml:lang='x-default'>"
		tail := "</rdf:li></rdf:Alt></dc:description></rdf:Description></rdf:RDF></x:xmpmeta>\n<?xpacket end='w'?>"
		bulk, unit := "lorem ipsum ", 12
		if items {
			head = strings.Replace(head, "<dc:description><rdf:Alt><rdf:li xml:lang='x-default'>", "<dc:subject><rdf:Bag>", 1)
			tail = strings.Replace(tail, "</rdf:li></rdf:Alt></dc:description>", "</rdf:Bag></dc:subject>", 1)
			bulk, unit = "<rdf:li>a</rdf:li>", 17
		}
		return []byte(head + strings.Repeat(bulk, max(0, each-len(head)-len(tail))/unit) + tail)
	}
	kids := make([]string, n)
	objs := []string{fmt.Sprintf("<< /Type /Catalog /Pages 2 0 R /Metadata %d 0 R >>", 3+2*n), ""}
	for i := range n {
		kids[i] = fmt.Sprintf("%d 0 R", 3+2*i)
		objs = append(objs, fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Metadata %d 0 R >>", 4+2*i),
			pdftest.Flate("/Type /Metadata /Subtype /XML", packet(fmt.Sprintf("page %d", i+1))))
	}
	objs[1] = fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), n)
	objs = append(objs, pdftest.Flate("/Type /Metadata /Subtype /XML", packet("document")))
	return pdftest.Build(objs, "/Root 1 0 R")
}

// blankPages is a document of n blank square pages of side points.
func blankPages(n, side int) []byte {
	kids := make([]string, n)
	for i := range kids {
		kids[i] = fmt.Sprintf("%d 0 R", i+3)
	}
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>", fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), n)}
	for range n {
		objs = append(objs, fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] >>", side, side))
	}
	return pdftest.Build(objs, "/Root 1 0 R")
}
