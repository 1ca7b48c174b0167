package pdf

// The object count bounds the parser's memory. pdfcpu reads every object the cross-reference sections name in
// use into its in-memory model, a few kB each however small the object: a 20 MB file of 400,000 tiny objects
// took a process to 1.16 GB to open (a 5 MB one of 100,000, 250 MB), where a real 1,158-page manual has
// 19,794 objects. Its own limits hold per cross-reference stream only. The scan before parsing counts two ways,
// and refuses when either passes Limits.MaxObjects:
//
//   - the distinct object numbers that the sections (classic tables and cross-reference streams) name in use:
//     what the parser reads from an intact file, whatever offsets or object stream slots the entries share;
//   - the object headers ("12 0 obj") in the file plus the objects its object streams declare (/N): what a
//     parser rebuilding a broken table by scanning the file finds.
//
// Both are linear in the file; the set of numbers is never larger than the limit.

// objectCounter collects the distinct object numbers named in use, up to max.
type objectCounter struct {
	seen map[int64]struct{}
	max  int
}

func newObjectCounter(max int) *objectCounter {
	return &objectCounter{seen: map[int64]struct{}{}, max: max}
}

// add counts object number nr, refusing once more than max distinct numbers were named.
func (c *objectCounter) add(nr int64) error {
	if c == nil {
		return nil
	}
	if _, ok := c.seen[nr]; ok {
		return nil
	}
	c.seen[nr] = struct{}{}
	if len(c.seen) > c.max {
		return tooManyObjects(c.max)
	}
	return nil
}

func tooManyObjects(max int) *Error {
	return refuse(CodeTooLarge, "the PDF has more than %d objects (its cross-reference table or object headers); the parser's memory grows with each", max)
}

// countObjectHeaders counts the object headers in data: "obj" after whitespace, an object number, whitespace
// and a generation number, and before a delimiter or whitespace (so "endobj" and "objects" do not count).
func countObjectHeaders(data []byte) int {
	n := 0
	for i := 0; i+3 <= len(data); i++ {
		if data[i] != 'o' || data[i+1] != 'b' || data[i+2] != 'j' {
			continue
		}
		if i+3 < len(data) && isRegular(data[i+3]) {
			continue
		}
		j := i - 1
		sp := j
		for j >= 0 && isSpace(data[j]) {
			j--
		}
		if j == sp {
			continue // no whitespace before "obj"
		}
		gen := j
		for j >= 0 && data[j] >= '0' && data[j] <= '9' {
			j--
		}
		if j == gen {
			continue
		}
		sp = j
		for j >= 0 && isSpace(data[j]) {
			j--
		}
		if j == sp || j < 0 || data[j] < '0' || data[j] > '9' {
			continue
		}
		n++
	}
	return n
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == 0
}
