package pdf

import "errors"

// tokenCounter counts, in the bytes written to it, the starts of the tokens the parser would build objects
// from: every delimiter ( ) < > [ ] { } / % and every run of regular characters that follows whitespace or a
// delimiter (so "/Type" counts 2, "<<" 2, "1 0 R" 3). It is a bound rather than a parse: it counts string
// contents and stream data too (the scan cannot tell what the parser will read: the cross-reference may point
// inside what looks like a stream), which a real document's few syntax bytes do not notice. pdfcpu holds about
// 40 bytes for each such token of an array or dictionary (memory.go), far more than the token's bytes, and
// spends its CPU on them: the scan before parsing refuses a file with more than Limits.MaxTokens (objstm.go).
type tokenCounter struct {
	n       int64
	max     int64 // Write fails with errTooManyTokens once n passes it, so a scan stops early
	regular bool  // the last byte written was a regular character
}

// errTooManyTokens stops the copy into a tokenCounter once its count passes its max.
var errTooManyTokens = errors.New("pdf: too many tokens")

func tooManyTokens(max int64) *Error {
	return refuse(CodeTooLarge, "the PDF has more than %d syntax tokens (in its bytes and its inflated object streams); the parser's time and memory grow with each", max)
}

// tokenClass classifies a byte: 0 whitespace, 1 delimiter, 2 regular.
var tokenClass = func() (t [256]uint8) {
	for c := range t {
		t[c] = 2
	}
	for _, c := range []byte(" \t\r\n\f\x00") {
		t[c] = 0
	}
	for _, c := range []byte("()<>[]{}/%") {
		t[c] = 1
	}
	return t
}()

func (t *tokenCounter) Write(p []byte) (int, error) {
	n, regular := t.n, t.regular
	for _, c := range p {
		switch tokenClass[c] {
		case 0:
			regular = false
		case 1:
			n++
			regular = false
		default:
			if !regular {
				n++
			}
			regular = true
		}
	}
	t.n, t.regular = n, regular
	if n > t.max {
		return len(p), errTooManyTokens
	}
	return len(p), nil
}
