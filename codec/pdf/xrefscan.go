package pdf

import (
	"bytes"
	"regexp"
	"slices"
	"strconv"
)

// The cross-reference checks refuse tables that name many objects at one offset. pdfcpu reads every object the
// table names in use, one parse and one kept object each, wherever it points: a 20 kB PDF whose cross-reference
// stream named two million objects, all at the catalog's offset, held a node for the whole minute of its parse
// budget and took its memory from 120 MB to 3.4 GB; an 18 MB classic table of 900,000 such entries did the same.
// In a well-formed section each object in use has an offset of its own (two objects cannot start at one byte),
// so a section whose objects in use outnumber their distinct offsets by more than maxSharedOffsets is refused.
// Each object a file really holds costs its bytes, which the size limits bound.
const maxSharedOffsets = 1000

// maxXRefRows bounds the rows of one cross-reference stream kept for the check (two million entries of the
// widest usual layout); a larger one is only counted against the inflation budget.
const maxXRefRows = 32 << 20

// capped writes into buf until it holds max bytes, then drops the rest (the caller compares the count).
type capped struct {
	buf *bytes.Buffer
	max int64
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - int64(c.buf.Len()); room > 0 {
		c.buf.Write(p[:min(int64(len(p)), room)])
	}
	return len(p), nil
}

// sharedOffsets refuses when the in-use offsets of one section repeat more than maxSharedOffsets times.
func sharedOffsets(offsets []int64) error {
	if len(offsets) <= maxSharedOffsets {
		return nil
	}
	slices.Sort(offsets)
	shared := 0
	for i := 1; i < len(offsets); i++ {
		if offsets[i] == offsets[i-1] && offsets[i] > 0 { // offset 0 (a writer's "n" for a free entry) parses as nothing
			shared++
		}
	}
	if shared > maxSharedOffsets {
		return refuse(CodeTooLarge, "the cross-reference table names %d objects at offsets other objects already start at", shared)
	}
	return nil
}

var (
	reXRefEntry = regexp.MustCompile(`^(\d{1,10}) (\d{1,5}) ([nf])`)
	reSubHeader = regexp.MustCompile(`^(\d+) (\d+)\s*$`)
)

// checkXRefTables reads the classic cross-reference sections ("xref", subsection headers, 20-byte entries up
// to "trailer") and checks each for shared offsets.
func checkXRefTables(data []byte, objects *objectCounter) error {
	for from := 0; ; {
		k := bytes.Index(data[from:], []byte("xref"))
		if k < 0 {
			return nil
		}
		at := from + k
		from = at + 4
		if at >= 5 && string(data[at-5:at]) == "start" { // startxref
			continue
		}
		var offsets []int64
		next := int64(-1) // the object number of the next entry, from the subsection header
		pos := from
		for pos < len(data) {
			end := bytes.IndexByte(data[pos:], '\n')
			if end < 0 {
				end = len(data) - pos
			}
			line := bytes.TrimLeft(bytes.TrimRight(data[pos:pos+end], "\r \t"), " \t\r")
			pos += end + 1
			if len(line) == 0 {
				continue
			}
			if m := reXRefEntry.FindSubmatch(line); m != nil {
				if m[3][0] == 'n' {
					off, _ := strconv.ParseInt(string(m[1]), 10, 64)
					offsets = append(offsets, off)
					if off > 0 && next >= 0 {
						if err := objects.add(next); err != nil {
							return err
						}
					}
				}
				if next >= 0 {
					next++
				}
				continue
			}
			if m := reSubHeader.FindSubmatch(line); m != nil {
				first, err := strconv.ParseInt(string(m[1]), 10, 64)
				next = first
				if err != nil || first < 0 {
					next = -1 // a number no reader takes: its entries name nothing to count
				}
				continue
			}
			break // "trailer" or anything else ends the section
		}
		if err := sharedOffsets(offsets); err != nil {
			return err
		}
		from = max(from, pos-1)
	}
}

var (
	reW       = regexp.MustCompile(`/W\s*\[\s*(\d+)\s+(\d+)\s+(\d+)\s*\]`)
	reIndex   = regexp.MustCompile(`/Index\s*\[([\d\s]*)\]`)
	reIntName = regexp.MustCompile(`/(Size|Length|Predictor|Columns|N)\s+(\d+)`)
)

// dictInt is the last direct integer value of key in a dictionary's text.
func dictInt(dict []byte, key string) (int64, bool) {
	var v int64
	found := false
	for _, m := range reIntName.FindAllSubmatch(dict, -1) {
		if string(m[1]) == key {
			if n, err := strconv.ParseInt(string(m[2]), 10, 64); err == nil {
				v, found = n, true
			}
		}
	}
	return v, found
}

// checkXRefStream decodes the rows of a cross-reference stream (its /W layout, after the PNG predictor when
// /DecodeParms names one) and checks its type-1 entries for shared offsets. A layout it cannot read is left to
// the parser.
func checkXRefStream(dict, rows []byte, objects *objectCounter) error {
	ws := reW.FindAllSubmatch(dict, -1)
	if len(ws) == 0 {
		return nil
	}
	m := ws[len(ws)-1]
	var w [3]int
	for i := range w {
		n, err := strconv.Atoi(string(m[i+1]))
		if err != nil || n > 8 {
			return nil
		}
		w[i] = n
	}
	width := w[0] + w[1] + w[2]
	if width == 0 {
		return nil
	}
	if p, ok := dictInt(dict, "Predictor"); ok && p >= 10 {
		cols, ok := dictInt(dict, "Columns")
		if !ok || cols != int64(width) {
			return nil
		}
		rows = unpredictPNG(rows, width)
		if rows == nil {
			return nil
		}
	}
	entries := len(rows) / width
	// numbers are the subsections' (first object number, count) pairs, by which the rows are numbered.
	var numbers [][2]int64
	if idx := reIndex.FindAllSubmatch(dict, -1); len(idx) > 0 {
		// The entries the subsections declare; rows past them are ignored by readers.
		f := bytes.Fields(idx[len(idx)-1][1])
		declared := int64(0)
		for i := 1; i < len(f); i += 2 {
			first, _ := strconv.ParseInt(string(f[i-1]), 10, 64)
			n, _ := strconv.ParseInt(string(f[i]), 10, 64)
			declared += n
			numbers = append(numbers, [2]int64{first, n})
		}
		entries = int(min(int64(entries), declared))
	} else if size, ok := dictInt(dict, "Size"); ok {
		entries = int(min(int64(entries), size))
		numbers = [][2]int64{{0, size}}
	}
	field := func(row []byte, i int) int64 {
		start := 0
		for j := range i {
			start += w[j]
		}
		var v int64
		for _, b := range row[start : start+w[i]] {
			v = v<<8 | int64(b)
		}
		return v
	}
	var offsets []int64
	row := func(r int, nr int64) error {
		row := rows[r*width : (r+1)*width]
		typ := int64(1)
		if w[0] > 0 {
			typ = field(row, 0)
		}
		if typ == 1 {
			offsets = append(offsets, field(row, 1))
		}
		// Types 1 (at an offset) and 2 (in an object stream) are objects in use, both read by the parser.
		if (typ == 1 || typ == 2) && nr >= 0 {
			return objects.add(nr)
		}
		return nil
	}
	r := 0
	for _, sub := range numbers {
		for k := int64(0); k < sub[1] && r < entries; k++ {
			if err := row(r, sub[0]+k); err != nil {
				return err
			}
			r++
		}
	}
	for ; r < entries; r++ { // rows no subsection numbers (a /Size that could not be read): offsets only
		if err := row(r, -1); err != nil {
			return err
		}
	}
	return sharedOffsets(offsets)
}

// unpredictPNG undoes the PNG row filters of width-byte rows (each led by its filter type), one byte a pixel;
// nil when the data is not whole rows or a filter type is unknown.
func unpredictPNG(data []byte, width int) []byte {
	stride := width + 1
	if len(data)%stride != 0 {
		return nil
	}
	n := len(data) / stride
	out := make([]byte, n*width)
	zero := make([]byte, width)
	for r := range n {
		in := data[r*stride+1 : (r+1)*stride]
		cur := out[r*width : (r+1)*width]
		prev := zero
		if r > 0 {
			prev = out[(r-1)*width : r*width]
		}
		for i := range width {
			var left, upLeft byte
			if i > 0 {
				left, upLeft = cur[i-1], prev[i-1]
			}
			up := prev[i]
			switch data[r*stride] {
			case 0:
				cur[i] = in[i]
			case 1:
				cur[i] = in[i] + left
			case 2:
				cur[i] = in[i] + up
			case 3:
				cur[i] = in[i] + byte((int(left)+int(up))/2)
			case 4:
				cur[i] = in[i] + paeth(left, up, upLeft)
			default:
				return nil
			}
		}
	}
	return out
}

func paeth(a, b, c byte) byte {
	p := int(a) + int(b) - int(c)
	pa, pb, pc := abs(p-int(a)), abs(p-int(b)), abs(p-int(c))
	switch {
	case pa <= pb && pa <= pc:
		return a
	case pb <= pc:
		return b
	}
	return c
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
