package pdf

import (
	"unicode/utf8"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"
)

// infoTextKeys are the document information entries the specification makes text strings, which pdfcpu's
// validation (also relaxed) refuses of another type.
var infoTextKeys = []string{"Title", "Author", "Subject", "Keywords", "Creator", "Producer"}

// repairInfo makes the document information dictionary one the validation accepts, before it runs: a text entry
// written as a name (/Title /Quarterly#20report) becomes the string of its text, a text entry of another type
// (a number, an array) and a /Trapped that is none of the values viewers know are dropped. Viewers show or
// ignore such entries and open the file; refused, it was answered "broken and could not be repaired" (the
// repair pass rewrites the file and keeps the entries as they are). It touches nothing else: the information
// dictionary is metadata the mark rewrites anyway (the structural layer's entry, pdfcpu's dates).
func (d *document) repairInfo() {
	xt := d.ctx.XRefTable
	if xt.Info == nil {
		return
	}
	info := d.dict(*xt.Info)
	if info == nil {
		return // not a dictionary: the relaxed validation drops it
	}
	for _, k := range infoTextKeys {
		v, ok := info[k]
		if !ok {
			continue
		}
		o, err := xt.Dereference(v)
		if err != nil {
			delete(info, k)
			continue
		}
		switch o := o.(type) {
		case types.StringLiteral, types.HexLiteral:
		case types.Name:
			if sl, ok := nameText(o); ok {
				info[k] = sl
			} else {
				delete(info, k)
			}
		default:
			delete(info, k)
		}
	}
	if v, ok := info["Trapped"]; ok {
		o, err := xt.Dereference(v)
		known := func(s string) bool {
			switch s {
			case "True", "False", "Unknown", "true", "false", "unknown":
				return true
			}
			return false
		}
		switch o := o.(type) {
		case types.Boolean:
		case types.Name:
			if err != nil || !known(o.Value()) {
				delete(info, "Trapped")
			}
		case types.StringLiteral:
			if !known(o.Value()) {
				delete(info, "Trapped")
			}
		default:
			delete(info, "Trapped")
		}
	}
}

// repairMetadata reads the catalog's /Metadata before the validation, which decodes it whole, and drops it when
// it is not a stream, cannot be decoded (a broken Flate stream, a filter pdfcpu does not decode), is larger than
// what the embed's edits may read (maxXMPBytes, and what the memory estimate counted: document.xmpBudget) or is
// not text they can read (readableXMP). The validation refused a document whose metadata it could not decode
// ("broken and could not be repaired": the repair pass copies the stream as it is), and decoded a large one
// whole, up to the parser's bound, outside the estimate. Viewers ignore such metadata and open the file; what
// could not be read could not be checked for thumbnails or a PDF/A identification either (metadata.go), so it
// is not kept unmodified. What it found is in d.catalogXMP.
func (d *document) repairMetadata() {
	d.catalogXMP = catalogXMPState{}
	xt := d.ctx.XRefTable
	root, err := xt.Catalog()
	if err != nil || root["Metadata"] == nil {
		return
	}
	// Dereferencing marks the object valid, and the validation then skips a valid catalog /Metadata and
	// deletes the entry: the mark is put back as it was.
	if ref, ok := root["Metadata"].(types.IndirectRef); ok {
		if e, ok := xt.FindTableEntryForIndRef(&ref); ok && e != nil {
			defer func(v bool) { e.Valid = v }(e.Valid)
		}
	}
	sd, _, err := xt.DereferenceStreamDict(root["Metadata"])
	if err != nil {
		delete(root, "Metadata")
		return
	}
	if sd == nil {
		return
	}
	limit := min(maxXMPBytes, d.xmpBudget)
	if limit <= 0 {
		// The estimate counted nothing for it (the scan saw no metadata stream: one with neither /Type
		// /Metadata nor /Subtype /XML), and pdfcpu reads a decode limit of 0 as its default: not decoded.
		delete(root, "Metadata")
		d.catalogXMP.dropped = xmpTooLarge
		return
	}
	x, err := streamText(sd, limit)
	if err == nil && int64(len(x)) <= limit {
		if _, ok := readableXMP(x); ok {
			return
		}
		d.catalogXMP.dropped = xmpUnreadable
		delete(root, "Metadata")
		return
	}
	delete(root, "Metadata")
	head := x // an unfiltered stream's text, whatever the limit
	if err != nil {
		// Larger than the limit, or broken: the first limit bytes decode only in the first case.
		head = nil
		if h, herr := (&types.StreamDict{Dict: sd.Dict, Raw: sd.Raw, FilterPipeline: sd.FilterPipeline}).
			DecodeLengthWithLimit(limit, limit); herr == nil {
			head = h
		}
	}
	if head == nil {
		return // broken: nothing was read of it
	}
	d.catalogXMP.dropped = xmpTooLarge
	d.catalogXMP.namesPDFAID = namesPDFAID(head[:min(int64(len(head)), limit)])
}

// streamText is sd's decoded bytes, up to limit: its Content once decoded, its stored bytes when it has no
// filter (pdfcpu's decoding wants one), else decoded now.
func streamText(sd *types.StreamDict, limit int64) ([]byte, error) {
	if sd.Content != nil {
		return sd.Content, nil
	}
	if len(sd.FilterPipeline) == 0 {
		return sd.Raw, nil
	}
	if err := sd.DecodeWithLimit(limit); err != nil {
		return nil, err
	}
	return sd.Content, nil
}

// nameText is a name's text as a PDF text string (PDFDocEncoding's ASCII part, else UTF-16BE), escaped as a
// literal; false for a name whose bytes are not UTF-8 text.
func nameText(n types.Name) (types.StringLiteral, bool) {
	s, err := types.DecodeName(n.Value())
	if err != nil || !utf8.ValidString(s) {
		return "", false
	}
	for _, r := range s {
		if r < 0x20 || r > 0x7e {
			s = types.EncodeUTF16String(s)
			break
		}
	}
	e, err := types.Escape(s)
	if err != nil {
		return "", false
	}
	return types.StringLiteral(*e), true
}
