package pdf

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
)

// checkObjectStreams bounds what the parser must inflate to read the file's objects: the object streams
// (/Type /ObjStm) and cross-reference streams (/Type /XRef), which pdfcpu decodes whole and keeps. Its own
// limit (Limits.MaxDecodeBytes) holds per stream only, so a file of many object streams, each inflating to just
// under it, made the node allocate their sum: a 1.6 MB PDF of eight 200 MB object streams raised a node's
// memory to 6.5 GB, and a 20 MB upload could hold a hundred. This scan inflates each such stream, counting
// bytes without keeping them, and refuses the file once their total passes maxDecode. Such a stream filtered by
// anything but FlateDecode (LZW, run-length; no writer uses them for these), or filtered and not zlib data, is
// refused too, as it cannot be counted here; one stored unfiltered is no bigger than the file. It runs before the parser; content and image streams are not its concern (pdfcpu does not
// decode them to read the file, and the renderer runs in its own memory-limited process). The same pass counts
// the objects the file names and refuses more than maxObjects (objcount.go), and the syntax tokens of the file
// and of its inflated object streams, refusing more than maxTokens (tokens.go).
func checkObjectStreams(path string, maxDecode int64, maxObjects int, maxTokens int64) error {
	_, err := scanObjects(path, maxDecode, maxObjects, maxTokens)
	return err
}

// objectScan is what checkObjectStreams' pass found in a file it accepts: the input of the memory estimate
// (memory.go).
type objectScan struct {
	size     int64 // the file's bytes
	named    int   // distinct object numbers the cross-reference sections name in use
	headers  int64 // object headers plus the objects the object streams declare (/N)
	inflated int64 // bytes the object and cross-reference streams inflate to, all together
	tokens   int64 // token starts in the file and in its inflated object streams (tokenCounter)
	xmp      int64 // bytes the metadata streams decode to, as the embed's edits may hold them (countMetadata)
}

// objects is the larger of the two counts: what the parser reads, intact or rebuilt.
func (s objectScan) objects() int64 { return max(int64(s.named), s.headers) }

// scanObjects is checkObjectStreams, reporting what it counted. Counting the tokens runs at about 570 MB/s
// and stops at maxTokens: 12 ms of the 64 ms the scan takes on octave.pdf (4.7 MB, 2.2 MB inflated), about
// 0.1 CPU-s for the largest file (bench/README.md, "PDF syntax tokens").
func scanObjects(path string, maxDecode int64, maxObjects int, maxTokens int64) (objectScan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return objectScan{}, fmt.Errorf("pdf: %w", err)
	}
	objects := newObjectCounter(maxObjects) // objcount.go
	if err := checkXRefTables(data, objects); err != nil {
		return objectScan{}, err
	}
	headers := int64(countObjectHeaders(data)) // plus the objects the object streams declare, as they are found
	if headers > int64(maxObjects) {
		return objectScan{}, tooManyObjects(maxObjects)
	}
	var total int64
	var xmp int64      // countMetadata's
	encrypted := false // a cross-reference stream's dictionary names /Encrypt
	tokens := tokenCounter{max: maxTokens}
	if _, err := tokens.Write(data); err != nil {
		return objectScan{}, tooManyTokens(maxTokens)
	}
	from := 0 // where the search for the next keyword starts; the text since is the next stream's dictionary
	for {
		k := bytes.Index(data[from:], []byte("stream"))
		if k < 0 {
			if encrypted || trailerDeclaresEncryption(data) {
				return objectScan{}, refuse(CodeEncrypted, "the PDF is encrypted; remove the encryption and send it again")
			}
			return objectScan{size: int64(len(data)), named: len(objects.seen), headers: headers, inflated: total, tokens: tokens.n,
				xmp: xmp}, nil
		}
		kw := from + k
		start := kw + len("stream")
		// The dictionary lies between the previous keyword (stream data skipped or endstream) and this one:
		// regions never overlap, so the scan is linear however the keywords are arranged.
		region := data[from:kw]
		from = start
		if kw >= 3 && string(data[kw-3:kw]) == "end" {
			continue // endstream
		}
		// The parser (pdfcpu) takes "stream" for the keyword when only whitespace separates it from a
		// dictionary's ">>", and starts the data after any spaces and one end of line, or at once when none
		// follows. The scan must count every stream the parser reads: a stream whose keyword was followed by a
		// space was skipped here, and its inflation and tokens went uncounted (two 16 MB object streams passed
		// as 50 MB of estimate).
		afterDict := bytes.HasSuffix(bytes.TrimRight(region, " \t\r\n\f\x00"), []byte(">>"))
		for start < len(data) && data[start] == ' ' {
			start++
		}
		switch {
		case bytes.HasPrefix(data[start:], []byte("\r\n")):
			start += 2
		case bytes.HasPrefix(data[start:], []byte("\n")), bytes.HasPrefix(data[start:], []byte("\r")):
			start++
		case !afterDict:
			continue // not the keyword
		}
		dict := decodeNameEscapes(region)
		if own := decodeNameEscapes(ownDict(region)); isMetadataDict(own) {
			xmp += countMetadata(own, data[start:], maxMetadataBytes-xmp)
			continue
		}
		if !hasName(dict, "/ObjStm") && !hasName(dict, "/XRef") {
			continue
		}
		isXRef := hasName(dict, "/XRef")
		if isXRef && hasName(decodeNameEscapes(ownDict(region)), "/Encrypt") {
			encrypted = true
		}
		if n, ok := dictInt(dict, "N"); ok && !isXRef {
			if headers += n; headers > int64(maxObjects) {
				return objectScan{}, tooManyObjects(maxObjects)
			}
		}
		if !hasName(dict, "/Filter") {
			if n, ok := dictInt(dict, "Length"); isXRef && ok && n >= 0 && int64(start)+n <= int64(len(data)) {
				if err := checkXRefStream(dict, data[start:int64(start)+n], objects); err != nil {
					return objectScan{}, err
				}
			}
			continue // stored as is: no bigger than the file
		}
		if !flateOnly(dict) {
			return objectScan{}, refuse(CodeTooLarge, "an object or cross-reference stream uses a filter other than FlateDecode")
		}
		br := bytes.NewReader(data[start:])
		zr, err := zlib.NewReader(br)
		if err != nil && !hasName(decodeNameEscapes(ownDict(region)), "/Filter") {
			// The /Filter seen belongs to an object written before this stream since the previous one (the
			// /Filter /Adobe.PPKLite of a signature, then the signing tool's unfiltered cross-reference stream):
			// stored as is, no bigger than the file. (A stream whose own dictionary names a filter after all
			// is no zlib data, which the parser cannot inflate either.)
			if n, ok := dictInt(dict, "Length"); isXRef && ok && n >= 0 && int64(start)+n <= int64(len(data)) {
				if err := checkXRefStream(dict, data[start:int64(start)+n], objects); err != nil {
					return objectScan{}, err
				}
			}
			continue
		}
		if err != nil {
			// Filtered, but not zlib data where the stream starts: encrypted (the object streams of an
			// encrypted file are, its cross-reference streams are not), a filter this scan cannot see (an
			// indirect /Filter naming another) or a broken stream. Either way its size cannot be counted. An
			// encrypted file is refused as encrypted, as the parser refuses one without object streams: told
			// "too large", the owner of a protected 100 kB document would not know what to change.
			if hasName(data, "/Encrypt") {
				return objectScan{}, refuse(CodeEncrypted, "the PDF is encrypted; remove the encryption and send it again")
			}
			return objectScan{}, refuse(CodeTooLarge, "an object or cross-reference stream is filtered but not Flate data")
		}
		var rows bytes.Buffer // a cross-reference stream's rows, kept up to maxXRefRows for checkXRefStream
		var sink io.Writer = io.Discard
		switch {
		case isXRef:
			sink = &capped{buf: &rows, max: maxXRefRows}
		default:
			// An object stream's objects, one token run after the other, within what the file left.
			sink = &tokenCounter{max: maxTokens - tokens.n}
		}
		n, cerr := io.Copy(sink, io.LimitReader(zr, maxDecode-total+1))
		zr.Close()
		total += n
		if errors.Is(cerr, errTooManyTokens) {
			return objectScan{}, tooManyTokens(maxTokens)
		}
		if tc, ok := sink.(*tokenCounter); ok {
			tokens.n += tc.n
		}
		if total > maxDecode {
			return objectScan{}, refuse(CodeTooLarge, "the PDF's object and cross-reference streams inflate to more than %d MB", maxDecode>>20)
		}
		if isXRef && n <= maxXRefRows {
			if err := checkXRefStream(dict, rows.Bytes(), objects); err != nil {
				return objectScan{}, err
			}
		}
		// Past the compressed data (a bytes.Reader is read no further than the inflater needs).
		from = start + int(br.Size()) - br.Len()
	}
}

// maxMetadataBytes bounds what the metadata streams may hold, decoded, all together while an embed edits them
// (metadata.go): the catalog's at most maxXMPBytes, the others' at most maxOtherXMPBytes.
const maxMetadataBytes = maxXMPBytes + maxOtherXMPBytes

var (
	metadataTypeRE    = regexp.MustCompile(`/Type\s*/Metadata\b`)
	metadataSubtypeRE = regexp.MustCompile(`/Subtype\s*/XML\b`)
)

// isMetadataDict reports whether a stream's own dictionary (name escapes decoded) is a metadata stream's: it
// names /Type /Metadata or /Subtype /XML (the specification requires both, pdfcpu's validation neither; writers
// write both). One that names neither is not counted, and the edits do not read it (document.xmpBudget).
func isMetadataDict(own []byte) bool {
	return metadataTypeRE.Match(own) || metadataSubtypeRE.Match(own)
}

// countMetadata is what a metadata stream whose data starts the bytes rest counts for the embed's edits of it
// (metadata.go), at most left: its bytes decoded, each stream up to maxXMPBytes+1 (past that the edits do not
// read it). Flate data is inflated and counted; unfiltered data is counted to its endstream keyword; data under
// another filter, which this scan does not decode, counts as the most the edits could hold of it. Nothing is
// decoded once left is spent: the edits then decode nothing more (document.xmpBudget). The stream's data is not
// skipped: the caller's search goes on from its start, as for any stream but an object stream.
func countMetadata(own, rest []byte, left int64) int64 {
	limit := min(left, maxXMPBytes+1)
	if limit <= 0 {
		return 0
	}
	switch {
	case !hasName(own, "/Filter"):
		if k := bytes.Index(rest, []byte("endstream")); k >= 0 {
			rest = rest[:k]
		}
		return min(int64(len(rest)), limit)
	case (hasName(own, "/FlateDecode") || hasName(own, "/Fl")) && flateOnly(own):
		zr, err := zlib.NewReader(bytes.NewReader(rest))
		if err != nil {
			return 0 // not Flate data: the edits cannot decode it either
		}
		defer zr.Close()
		n, _ := io.Copy(io.Discard, io.LimitReader(zr, limit))
		return n
	}
	return limit
}

// trailerDeclaresEncryption reports whether a classic trailer (the text from a "trailer" keyword to the next
// "startxref") names /Encrypt. The scan refuses encrypted files itself, whatever the layout: the parser
// (pdfcpu) knows only an /Encrypt given as a reference, and read the direct dictionary MuPDF writes as no
// encryption at all, so such a file was marked with its encrypted streams copied as if plain (a corrupt
// output, its pages blank or broken, and charged).
func trailerDeclaresEncryption(data []byte) bool {
	for from := 0; ; {
		k := bytes.Index(data[from:], []byte("trailer"))
		if k < 0 {
			return false
		}
		at := from + k + len("trailer")
		end := len(data)
		if e := bytes.Index(data[at:], []byte("startxref")); e >= 0 {
			end = at + e
		}
		if hasName(decodeNameEscapes(data[at:end]), "/Encrypt") {
			return true
		}
		from = end // the regions do not overlap: the scan stays linear however many "trailer"s a file holds
	}
}

// ownDict is the part of a scan region that holds the stream's own object: the text after the region's last
// "obj" keyword (its header's), where the region also holds the objects written since the previous stream.
func ownDict(region []byte) []byte {
	if k := bytes.LastIndex(region, []byte("obj")); k >= 0 {
		return region[k+len("obj"):]
	}
	return region
}

// flateOnly reports whether a stream dictionary names no filter besides FlateDecode (or none at all). The text
// before the dictionary in the same scan region counts too: a false refusal needs another filter's name
// between the previous stream and an object stream, which writers do not put there, while a narrower reading
// (the last /Filter only) could be fooled by a string in the dictionary.
func flateOnly(dict []byte) bool {
	for _, f := range []string{"/LZWDecode", "/LZW", "/RunLengthDecode", "/RL", "/ASCII85Decode", "/A85",
		"/ASCIIHexDecode", "/AHx", "/Crypt", "/DCTDecode", "/DCT", "/JPXDecode", "/JBIG2Decode", "/CCITTFaxDecode", "/CCF"} {
		if hasName(dict, f) {
			return false
		}
	}
	return true
}

// hasName reports whether b holds the PDF name (with its slash) as a whole name: /XRef is not found in
// /XRefStm, the trailer key of hybrid files.
func hasName(b []byte, name string) bool {
	for i := 0; ; {
		k := bytes.Index(b[i:], []byte(name))
		if k < 0 {
			return false
		}
		end := i + k + len(name)
		if end == len(b) || !isRegular(b[end]) {
			return true
		}
		i = end
	}
}

// decodeNameEscapes replaces the #xx escapes of PDF names (so /Obj#53tm reads /ObjStm).
func decodeNameEscapes(b []byte) []byte {
	if bytes.IndexByte(b, '#') < 0 {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '#' && i+2 < len(b) && isHex(b[i+1]) && isHex(b[i+2]) {
			out = append(out, unhex(b[i+1])<<4|unhex(b[i+2]))
			i += 2
			continue
		}
		out = append(out, b[i])
	}
	return out
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}
