package pdf

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
)

// checkNesting scans the file's bytes for the nesting depth of dictionaries and arrays outside strings, comments
// and stream data, and refuses files that nest deeper than maxDepth: a cheap bound, checked before the parser
// recurses, against "nesting bombs". Objects inside compressed object streams are bounded by the parser's own
// recursion limit instead.
func checkNesting(path string, maxDepth int) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("pdf: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	depth, strDepth := 0, 0
	var prev byte
	var word []byte // the current regular-character run, to spot the "stream" keyword
	for {
		c, err := br.ReadByte()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("pdf: %w", err)
		}
		if strDepth > 0 { // inside a literal string: balanced parentheses, backslash escapes
			switch c {
			case '\\':
				if _, err := br.ReadByte(); err != nil {
					return nil
				}
			case '(':
				strDepth++
			case ')':
				strDepth--
			}
			prev = 0
			continue
		}
		switch c {
		case '%':
			if _, err := br.ReadSlice('\n'); err != nil && err != bufio.ErrBufferFull {
				return nil
			}
			word = word[:0]
		case '(':
			strDepth = 1
			word = word[:0]
		case '[':
			depth++
			word = word[:0]
		case ']':
			depth = max(0, depth-1)
			word = word[:0]
		case '<':
			if prev == '<' {
				depth++
				c = 0 // "<<<" is "<<" then "<"
			}
			word = word[:0]
		case '>':
			if prev == '>' {
				depth = max(0, depth-1)
				c = 0
			}
			word = word[:0]
		default:
			if isRegular(c) {
				if len(word) < 16 {
					word = append(word, c)
				}
			} else {
				if bytes.Equal(word, []byte("stream")) {
					if err := skipStream(br); err != nil {
						return nil
					}
					depth = 0
				}
				word = word[:0]
			}
		}
		if depth > maxDepth {
			return refuse(CodeTooLarge, "the PDF nests dictionaries or arrays deeper than %d levels", maxDepth)
		}
		prev = c
	}
}

func isRegular(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '\f', 0, '(', ')', '<', '>', '[', ']', '{', '}', '/', '%':
		return false
	}
	return true
}

// skipStream advances past the next "endstream".
func skipStream(br *bufio.Reader) error {
	const kw = "endstream"
	matched := 0
	for {
		c, err := br.ReadByte()
		if err != nil {
			return err
		}
		switch {
		case c == kw[matched]:
			matched++
			if matched == len(kw) {
				return nil
			}
		case c == kw[0]:
			matched = 1
		default:
			matched = 0
		}
	}
}
