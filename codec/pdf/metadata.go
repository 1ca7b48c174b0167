package pdf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"
)

// Metadata of the marked output: what it says of the document (dates, producer) and what it must not carry
// (thumbnails). pdfcpu's writer sets the information dictionary's /Producer to itself and both its
// /CreationDate and /ModDate to the time of writing (documents before PDF 2.0). A marked file is the input
// modified, not a new document, so:
//
//   - the input's creation date is kept: the information dictionary's, else the XMP's xmp:CreateDate (a time
//     without a zone read as UTC, in both); it is written over the writer's in the written file, in the
//     writer's form, which has the same width. A document that states neither gets the writer's (the time of
//     marking);
//   - the modification date is the writer's, the time of marking;
//   - the catalog's XMP, PDF/A or not, is made to agree with the information dictionary (pdf:Producer,
//     xmp:CreateDate, xmp:ModifyDate, xmp:MetadataDate): PDF/A requires it, and readers show one or the other.
//     Only in a document that claims PDF/A are missing properties added (pdfa.go: an XMP that cannot take them
//     is dropped); elsewhere the properties present are set and the rest left out, so that no XMP is dropped
//     for want of a date. In a PDF 2.0 document, whose information dictionary the writer leaves alone (2.0
//     keeps only its two dates), the dates are set here, before writing: the creation date kept, the
//     modification date the time of marking, in the information dictionary when it has one and in the XMP;
//   - thumbnails are dropped: a page's /Thumb image and the XMP's xmp:Thumbnails (and any xmpGImg:image) are
//     renderings of the unmarked page, which anyone could extract as an unmarked copy. Viewers draw their own
//     thumbnails when a page has none. Applications' private data (/PieceInfo) goes for the same reason
//     (dropPrivateData);
//   - XMP is read as UTF-8, or as UTF-16 with a byte order mark (readableXMP); XMP that cannot be read (another
//     encoding, undecodable, larger than maxXMPBytes or than the memory estimate counted: document.xmpBudget)
//     is not kept unread, as it could hold a thumbnail or a PDF/A identification: the catalog's is dropped
//     (repairMetadata, before the validation decodes it), another emptied.
//
// The writer's time is known only once it has run, so the XMP is written unfiltered with fixed-width
// placeholders, replaced in place in the written file (patchWritten), as the creation date is.
//
// This file owns those edits of the metadata streams, the information dictionary's dates, the pages' /Thumb
// entries and the /PieceInfo entries; it must not touch the page content.

const nsXMPGImg = "http://ns.adobe.com/xap/1.0/g/img/"

// metadataEdit is what patchWritten does to the written file.
type metadataEdit struct {
	xmpObj  int    // the metadata stream, written with date placeholders; 0 for none
	created string // the input's creation date in the writer's form, written over the writer's; "" for none
}

// prepareMetadata drops the pages' thumbnails and rewrites the catalog's metadata stream for the output (the
// comment above and pdfa.go's), recording a PDF/A claim in rep. now is the time of marking.
func (d *document) prepareMetadata(rep *EmbedReport, now time.Time) (*metadataEdit, error) {
	if err := d.dropPageThumbnails(); err != nil {
		return nil, err
	}
	if err := d.dropPrivateData(); err != nil {
		return nil, err
	}
	xt := d.ctx.XRefTable
	root, err := xt.Catalog()
	if err != nil {
		return nil, err
	}
	writerDates := xt.Version() < model.V20
	e := &metadataEdit{}
	if d.catalogXMP.dropped == xmpTooLarge && d.catalogXMP.namesPDFAID {
		// Dropped unread (repairMetadata): a PDF/A identification of a part not known, which the output no
		// longer claims.
		rep.PDFA, rep.PDFARemoved = "?", true
	}
	objNr, xmp := d.readCatalogXMP()
	if err := d.dropOtherXMPThumbnails(objNr, d.xmpBudget-int64(len(xmp))); err != nil {
		return nil, err
	}
	created, hasCreated := d.inputCreationDate(xmp)
	if hasCreated && writerDates {
		e.created = types.DateString(created)
	}
	if !writerDates && xt.Info != nil {
		// PDF 2.0 keeps of the information dictionary only these two dates, which the writer leaves alone.
		if info := d.dict(*xt.Info); info != nil {
			info["ModDate"] = types.StringLiteral(types.DateString(now))
			if hasCreated {
				info["CreationDate"] = types.StringLiteral(types.DateString(created))
			}
		}
	}
	if objNr == 0 {
		return e, nil
	}
	orig := xmp
	part, conformance := pdfaClaim(xmp)
	if part > 0 {
		rep.PDFA = fmt.Sprintf("%d%s", part, conformance)
		if !((part == 2 || part == 3) && d.pdfaOutputIntent()) {
			rep.PDFARemoved = true
			xmp = removePDFAID(xmp)
		}
	}
	xmp = removeXMPThumbnails(xmp)
	add := part > 0
	var sets []xmpValueSet
	if writerDates {
		create := createDatePlaceholder
		if e.created != "" {
			create, _ = xmpDate(e.created)
		}
		sets = []xmpValueSet{
			{nsPDF, "pdf", "Producer", "pdfcpu " + model.VersionStr, add},
			{nsXMP, "xmp", "ModifyDate", modDatePlaceholder, add},
			{nsXMP, "xmp", "CreateDate", create, add},
			{nsXMP, "xmp", "MetadataDate", modDatePlaceholder, false},
		}
	} else {
		mod := now.Format(xmpDateLayout)
		sets = []xmpValueSet{
			{nsXMP, "xmp", "ModifyDate", mod, add},
			{nsXMP, "xmp", "MetadataDate", mod, false},
		}
		if hasCreated {
			sets = append(sets, xmpValueSet{nsXMP, "xmp", "CreateDate", created.Format(xmpDateLayout), add})
		}
	}
	var ok bool
	if xmp, ok = setXMPValues(xmp, sets); !ok {
		// XMP this code cannot edit: what is left then claims nothing it does not hold.
		delete(root, "Metadata")
		rep.PDFARemoved = true
		return e, nil
	}
	if bytes.Equal(xmp, orig) {
		return e, nil
	}
	if err := d.setXMP(objNr, xmp); err != nil {
		return nil, err
	}
	if bytes.Contains(xmp, []byte(modDatePlaceholder)) || bytes.Contains(xmp, []byte(createDatePlaceholder)) {
		e.xmpObj = objNr
	}
	return e, nil
}

// setXMP makes metadata stream objNr hold xmp, unfiltered: PDF/A wants metadata readable without PDF tools, and
// patchWritten finds the placeholders in the written bytes.
func (d *document) setXMP(objNr int, xmp []byte) error {
	entry, ok := d.ctx.XRefTable.Table[objNr]
	if !ok || entry == nil {
		return fmt.Errorf("metadata stream %d not in the table", objNr)
	}
	old, _ := entry.Object.(types.StreamDict)
	dict := types.Dict{}
	for k, v := range old.Dict {
		switch k {
		case "Filter", "DecodeParms", "Length", "DL":
		default:
			dict[k] = v
		}
	}
	dict["Type"] = types.Name("Metadata")
	dict["Subtype"] = types.Name("XML")
	n := int64(len(xmp))
	dict["Length"] = types.Integer(n)
	entry.Object = types.StreamDict{Dict: dict, Content: xmp, Raw: xmp, StreamLength: &n}
	return nil
}

// maxOtherXMPBytes bounds what dropOtherXMPThumbnails decodes in all (a file's metadata streams could each
// inflate to maxXMPBytes).
const maxOtherXMPBytes = 8 * maxXMPBytes

// dropOtherXMPThumbnails removes the thumbnails of the metadata streams other than the catalog's (skip): a page's,
// an image's, a marked-content property list's (Illustrator and InDesign keep a placed artwork's XMP, thumbnail
// included, there). It decodes at most budget bytes in all (what the memory estimate counted for them: the
// catalog's taken) and maxOtherXMPBytes. A metadata stream that cannot be read within the bounds (undecodable,
// over maxXMPBytes, past the budget, text readableXMP cannot read) and may hold one is emptied: readers ignore
// empty metadata. A UTF-16 stream that holds one is rewritten in UTF-8.
func (d *document) dropOtherXMPThumbnails(skip int, budget int64) error {
	xt := d.ctx.XRefTable
	budget = min(budget, maxOtherXMPBytes)
	for nr, e := range xt.Table {
		if nr == skip || e == nil || e.Free {
			continue
		}
		sd, ok := e.Object.(types.StreamDict)
		if !ok || d.name(sd.Dict["Type"]) != "Metadata" {
			continue
		}
		if len(sd.FilterPipeline) == 0 && sd.Content == nil && plainUTF8(sd.Raw) && !mayHoldThumbnail(sd.Raw) {
			continue // plain text without a thumbnail: nothing to decode
		}
		var x []byte
		var err error
		limit := min(budget, maxXMPBytes)
		if limit > 0 { // pdfcpu reads a decode limit of 0 as its default
			x, err = streamText(&sd, limit)
		}
		if int64(len(x)) > limit {
			x = nil // an unfiltered stream's bytes (streamText's, whatever the limit)
		}
		budget -= int64(len(x))
		text, readable := readableXMP(x)
		switch {
		case x == nil || err != nil || !readable:
			text = []byte{}
		case !mayHoldThumbnail(text):
			continue
		default:
			text = removeXMPThumbnails(text)
		}
		if err := d.setXMP(nr, text); err != nil {
			return err
		}
	}
	return nil
}

// mayHoldThumbnail reports whether XMP text names a thumbnail property or its image namespace.
func mayHoldThumbnail(x []byte) bool {
	return bytes.Contains(x, []byte("Thumbnails")) || bytes.Contains(x, []byte(nsXMPGImg))
}

// catalogXMPState is what repairMetadata found of the catalog's metadata stream.
type catalogXMPState struct {
	dropped     xmpDrop // why it was dropped; xmpKept when it was not (or there was none)
	namesPDFAID bool    // too large: what was read of it names the PDF/A identification's namespace
}

// xmpDrop is why the catalog's metadata stream was dropped before the validation.
type xmpDrop int

const (
	xmpKept       xmpDrop = iota
	xmpTooLarge           // larger decoded than maxXMPBytes, or than the memory estimate counted for it
	xmpUnreadable         // decoded, but not text readableXMP reads (UTF-32, UTF-16 without a mark, binary)
)

// readCatalogXMP is the catalog's metadata stream: its object number and text as UTF-8 (readableXMP), or 0, nil
// without one. repairMetadata dropped one that cannot be read so within the bounds; one that cannot be read now
// is dropped too.
func (d *document) readCatalogXMP() (objNr int, xmp []byte) {
	xt := d.ctx.XRefTable
	root, err := xt.Catalog()
	if err != nil {
		return 0, nil
	}
	ref, ok := root["Metadata"].(types.IndirectRef)
	if !ok {
		return 0, nil
	}
	sd, _, err := xt.DereferenceStreamDict(ref)
	if err != nil || sd == nil {
		return 0, nil
	}
	limit := min(maxXMPBytes, d.xmpBudget)
	var x []byte
	if limit > 0 {
		x, err = streamText(sd, limit)
	}
	text, ok := readableXMP(x)
	if limit <= 0 || err != nil || int64(len(x)) > limit || !ok {
		delete(root, "Metadata")
		return 0, nil
	}
	return ref.ObjectNumber.Value(), text
}

// readableXMP is XMP text as the edits here read it, UTF-8: UTF-8 as it is, UTF-16 with a byte order mark
// converted (XMP allows UTF-16 and UTF-32 packets, ISO 16684-1 7.3.2, and some Windows tools write UTF-16);
// false for anything else (UTF-32, UTF-16 without a mark, another encoding, binary), in which the edits could
// find neither a thumbnail nor a PDF/A identification.
func readableXMP(x []byte) ([]byte, bool) {
	var order binary.ByteOrder
	switch {
	case bytes.HasPrefix(x, []byte{0xfe, 0xff}):
		order = binary.BigEndian
	case bytes.HasPrefix(x, []byte{0xff, 0xfe}):
		order = binary.LittleEndian
	default:
		return x, plainUTF8(x)
	}
	x = x[2:]
	if len(x)%2 != 0 {
		return nil, false
	}
	out := make([]byte, 0, len(x)/2+len(x)/8) // XMP is mostly ASCII: a byte a character
	for i := 0; i < len(x); i += 2 {
		r := rune(order.Uint16(x[i:]))
		if utf16.IsSurrogate(r) {
			r2 := utf8.RuneError
			if i+4 <= len(x) {
				r2 = utf16.DecodeRune(r, rune(order.Uint16(x[i+2:])))
			}
			if r = r2; r != utf8.RuneError {
				i += 2
			}
		}
		if r == 0 {
			return nil, false
		}
		out = utf8.AppendRune(out, r)
	}
	return out, true
}

// plainUTF8 reports whether x is UTF-8 text without NULs (which UTF-8 XMP never holds; UTF-16 and UTF-32
// text does).
func plainUTF8(x []byte) bool {
	return bytes.IndexByte(x, 0) < 0 && utf8.Valid(x)
}

// namesPDFAID reports whether the start of an XMP packet names the PDF/A identification's namespace, in UTF-8 or
// UTF-16.
func namesPDFAID(head []byte) bool {
	if bytes.Contains(head, []byte(nsPDFAID)) {
		return true
	}
	be, le := make([]byte, 0, 2*len(nsPDFAID)), make([]byte, 0, 2*len(nsPDFAID))
	for _, c := range []byte(nsPDFAID) {
		be, le = append(be, 0, c), append(le, c, 0)
	}
	return bytes.Contains(head, be) || bytes.Contains(head, le)
}

// dropPrivateData removes the applications' private data (/PieceInfo, page-piece dictionaries: ISO 32000-1
// 14.5) of the pages, the form XObjects and the catalog, but for the structural layer's own entry in the
// catalog's (structural.go). An application keeps there what it needs to edit the page as its own document:
// Illustrator, the whole artwork (its AIPrivateData streams), which it opens as the unmarked original. A marked
// copy must not carry one, as it must not carry a thumbnail. What is lost is the round trip: the application
// opens the marked file as a PDF, not as its own document. The writer writes only what is reachable, so the
// private data's streams go with the entries.
func (d *document) dropPrivateData() error {
	xt := d.ctx.XRefTable
	root, err := xt.Catalog()
	if err != nil {
		return err
	}
	ours := d.dict(root["PieceInfo"])[pieceKey]
	for _, e := range xt.Table {
		if e == nil || e.Free {
			continue
		}
		switch o := e.Object.(type) {
		case types.Dict:
			delete(o, "PieceInfo")
		case types.StreamDict:
			delete(o.Dict, "PieceInfo")
		}
	}
	if ours != nil {
		root["PieceInfo"] = types.Dict{pieceKey: ours}
	}
	return nil
}

// xmpDateLayout is the XMP form of a date, of xmpDateLen characters for years 1000 to 9999.
const xmpDateLayout = "2006-01-02T15:04:05-07:00"

// inputCreationDate is the creation date the input states: its information dictionary's, else its XMP's
// xmp:CreateDate. Years the writer's form cannot hold in its width are not read.
func (d *document) inputCreationDate(xmp []byte) (time.Time, bool) {
	writable := func(t time.Time) bool { return t.Year() >= 1000 && t.Year() <= 9999 }
	if xt := d.ctx.XRefTable; xt.Info != nil {
		if info := d.dict(*xt.Info); info != nil {
			if t, ok := pdfDate(d.text(info["CreationDate"])); ok && writable(t) {
				return t, true
			}
		}
	}
	for _, p := range xmlPrefixes(xmp, nsXMP) {
		if v, ok := xmpValue(xmp, p, "CreateDate"); ok {
			// The XMP date forms (ISO 8601 profiles); a time without a zone is read as UTC.
			for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02T15:04:05.999999999",
				"2006-01-02T15:04", "2006-01-02", "2006-01", "2006"} {
				if t, err := time.Parse(layout, v); err == nil && writable(t) {
					return t.Truncate(time.Second), true
				}
			}
		}
	}
	return time.Time{}, false
}

// pdfDate reads a PDF date (PDF 32000 7.9.4: D:YYYYMMDDHHmmSSOHH'mm', each part after the year optional, the
// apostrophes too; no offset is read as UTC). pdfcpu's reading (v0.15.0) adds a negative offset's minutes the
// wrong way: -05'30' is read as -04:30.
func pdfDate(s string) (time.Time, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "D:")
	digits := func(n int) (int, bool) {
		if len(s) < n {
			return 0, false
		}
		v, err := strconv.Atoi(s[:n])
		if err != nil || v < 0 || strings.ContainsAny(s[:n], "+-") {
			return 0, false
		}
		s = s[n:]
		return v, true
	}
	year, ok := digits(4)
	if !ok {
		return time.Time{}, false
	}
	// month, day, hour, minute, second, each present only if the one before is
	f := [5]int{1, 1, 0, 0, 0}
	max := [5]int{12, 31, 23, 59, 59}
	for i := range f {
		if len(s) == 0 || s[0] < '0' || s[0] > '9' {
			break
		}
		v, ok := digits(2)
		if !ok || v > max[i] || (i < 2 && v == 0) {
			return time.Time{}, false
		}
		f[i] = v
	}
	loc := time.UTC
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		sign := 1
		if s[0] == '-' {
			sign = -1
		}
		s = s[1:]
		h, ok := digits(2)
		if !ok || h > 23 {
			return time.Time{}, false
		}
		s = strings.TrimPrefix(s, "'")
		m := 0
		if len(s) >= 2 {
			if m, ok = digits(2); !ok || m > 59 {
				return time.Time{}, false
			}
		}
		s = strings.TrimPrefix(s, "'")
		loc = time.FixedZone("", sign*(h*3600+m*60))
	} else {
		s = strings.TrimPrefix(s, "Z")
		s = strings.TrimPrefix(strings.TrimPrefix(s, "00'00"), "'") // Z00'00' as some writers put it
	}
	if s != "" {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(f[0]), f[1], f[2], f[3], f[4], 0, loc)
	if t.Day() != f[1] {
		return time.Time{}, false // 31 February
	}
	return t, true
}

// removeXMPThumbnails removes xmp:Thumbnails and xmpGImg:image (a base64 JPEG) under every prefix bound to
// their namespaces.
func removeXMPThumbnails(x []byte) []byte {
	for _, p := range xmlPrefixes(x, nsXMP) {
		q := regexp.QuoteMeta(p + ":Thumbnails")
		// The shortest attribute list first, so that an empty element's "/>" is not taken for an attribute.
		re := regexp.MustCompile(`(?s)<` + q + `(?:\s[^>]*?)?(?:/>|>.*?</` + q + `\s*>)`)
		x = re.ReplaceAll(x, nil)
	}
	for _, p := range xmlPrefixes(x, nsXMPGImg) {
		attr, elem := propREs(p, "image")
		x = attr.ReplaceAll(x, nil)
		x = elem.ReplaceAll(x, nil)
	}
	return x
}

// dropPageThumbnails removes every page's /Thumb entry; the writer writes only what is reachable, so the
// thumbnail images go with them.
func (d *document) dropPageThumbnails() error {
	for p := 1; p <= d.info.Pages; p++ {
		pd, _, err := d.page(p)
		if err != nil {
			return fmt.Errorf("page %d: %w", p, err)
		}
		delete(pd, "Thumb")
	}
	return nil
}

// patchWritten writes, in f, the file pdfcpu's writer just wrote, the input's creation date over the writer's in
// the information dictionary, then the information dictionary's dates over the placeholders of the metadata
// stream.
func (d *document) patchWritten(f *os.File, e *metadataEdit) error {
	if e == nil || (e.created == "" && e.xmpObj == 0) {
		return nil
	}
	xt := d.ctx.XRefTable
	if xt.Info == nil {
		return errors.New("no information dictionary written")
	}
	infoNr := xt.Info.ObjectNumber.Value()
	info := d.dict(*xt.Info)
	if e.created != "" {
		written := d.text(info["CreationDate"])
		if len(written) != len(e.created) {
			return fmt.Errorf("creation date %q written as %q, of another width", e.created, written)
		}
		re := regexp.MustCompile(`/CreationDate\s*\(` + regexp.QuoteMeta(written) + `\)`)
		err := d.patchObject(f, infoNr, int64(len(info.PDFString())), func(obj []byte) error {
			loc := re.FindIndex(obj)
			if loc == nil {
				return errors.New("information dictionary written without its creation date")
			}
			copy(obj[loc[1]-1-len(written):], e.created)
			return nil
		})
		if err != nil {
			return err
		}
		info["CreationDate"] = types.StringLiteral(e.created)
	}
	if e.xmpObj == 0 {
		return nil
	}
	mod, err1 := xmpDate(d.text(info["ModDate"]))
	create, err2 := xmpDate(d.text(info["CreationDate"]))
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	sd, _ := xt.Table[e.xmpObj].Object.(types.StreamDict)
	return d.patchObject(f, e.xmpObj, int64(len(sd.PDFString())+len(sd.Raw)), func(obj []byte) error {
		// The stream's bytes are the XMP as prepareMetadata made it; the placeholders are replaced within them.
		i := bytes.Index(obj, sd.Raw)
		if i < 0 {
			return fmt.Errorf("metadata stream %d not found where it was written", e.xmpObj)
		}
		buf := obj[i : i+len(sd.Raw)]
		for _, r := range [][2]string{{modDatePlaceholder, mod}, {createDatePlaceholder, create}} {
			for i := bytes.Index(buf, []byte(r[0])); i >= 0; i = bytes.Index(buf, []byte(r[0])) {
				copy(buf[i:], r[1])
			}
		}
		return nil
	})
}

// patchObject reads object objNr as the writer wrote it in f (size: about its serialised length), lets edit
// change those bytes in place, and writes them back at the same offset.
func (d *document) patchObject(f *os.File, objNr int, size int64, edit func(obj []byte) error) error {
	off, ok := d.ctx.Write.Table[objNr]
	if e := d.ctx.XRefTable.Table[objNr]; !ok || e == nil || e.Compressed {
		return fmt.Errorf("object %d not written as a plain object", objNr)
	}
	// The header ("N 0 obj") and the serialisation's slack besides the object's own bytes.
	buf := make([]byte, size+256)
	n, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	buf = buf[:n]
	if err := edit(buf); err != nil {
		return err
	}
	_, err = f.WriteAt(buf, off)
	return err
}
