package codec

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// CanonicalJSON returns the RFC 8785 (JSON Canonicalization Scheme) form of a JSON text: object members sorted by
// the UTF-16 code units of their names, no whitespace, strings with the minimal ECMAScript escaping and numbers in
// ECMAScript Number.prototype.toString form. Input that is not I-JSON (RFC 7493) is rejected: invalid UTF-8, lone
// surrogates, duplicate member names, numbers beyond IEEE-754 double range, and trailing data.
func CanonicalJSON(data []byte) ([]byte, error) {
	p := jsonParser{src: data}
	p.skipSpace()
	var out strings.Builder
	if err := p.value(&out, 0); err != nil {
		return nil, fmt.Errorf("codec: canonical JSON: %w", err)
	}
	p.skipSpace()
	if p.pos != len(p.src) {
		return nil, fmt.Errorf("codec: canonical JSON: trailing data at offset %d", p.pos)
	}
	return []byte(out.String()), nil
}

// maxJSONDepth bounds nesting so that hostile input cannot exhaust the stack.
const maxJSONDepth = 512

type jsonParser struct {
	src []byte
	pos int
}

func (p *jsonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value parses one JSON value at p.pos and writes its canonical form to out.
func (p *jsonParser) value(out *strings.Builder, depth int) error {
	if depth > maxJSONDepth {
		return p.errorf("nesting deeper than %d", maxJSONDepth)
	}
	if p.pos >= len(p.src) {
		return p.errorf("unexpected end of input")
	}
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.object(out, depth)
	case c == '[':
		return p.array(out, depth)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return err
		}
		writeJSONString(out, s)
		return nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(out)
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if strings.HasPrefix(string(p.src[p.pos:min(len(p.src), p.pos+len(lit))]), lit) {
				p.pos += len(lit)
				out.WriteString(lit)
				return nil
			}
		}
		return p.errorf("unexpected character %q", c)
	}
}

type jsonMember struct {
	key   string
	units []uint16
	value string
}

func (p *jsonParser) object(out *strings.Builder, depth int) error {
	p.pos++ // '{'
	var members []jsonMember
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		out.WriteString("{}")
		return nil
	}
	seen := map[string]bool{}
	for {
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != '"' {
			return p.errorf("expected member name")
		}
		key, err := p.str()
		if err != nil {
			return err
		}
		if seen[key] {
			return p.errorf("duplicate member name %q", key)
		}
		seen[key] = true
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return p.errorf("expected ':'")
		}
		p.pos++
		p.skipSpace()
		var v strings.Builder
		if err := p.value(&v, depth+1); err != nil {
			return err
		}
		members = append(members, jsonMember{key: key, units: utf16.Encode([]rune(key)), value: v.String()})
		p.skipSpace()
		if p.pos >= len(p.src) {
			return p.errorf("unterminated object")
		}
		if p.src[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.src[p.pos] != '}' {
			return p.errorf("expected ',' or '}'")
		}
		p.pos++
		break
	}
	// RFC 8785 section 3.2.3: sort by the UTF-16 code units of the names, not by code points or bytes.
	slices.SortFunc(members, func(a, b jsonMember) int { return slices.Compare(a.units, b.units) })
	out.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			out.WriteByte(',')
		}
		writeJSONString(out, m.key)
		out.WriteByte(':')
		out.WriteString(m.value)
	}
	out.WriteByte('}')
	return nil
}

func (p *jsonParser) array(out *strings.Builder, depth int) error {
	p.pos++ // '['
	out.WriteByte('[')
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		p.pos++
		out.WriteByte(']')
		return nil
	}
	for first := true; ; first = false {
		if !first {
			out.WriteByte(',')
		}
		p.skipSpace()
		if err := p.value(out, depth+1); err != nil {
			return err
		}
		p.skipSpace()
		if p.pos >= len(p.src) {
			return p.errorf("unterminated array")
		}
		if p.src[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.src[p.pos] != ']' {
			return p.errorf("expected ',' or ']'")
		}
		p.pos++
		out.WriteByte(']')
		return nil
	}
}

// str parses a JSON string at p.pos (which holds '"') and returns its decoded value.
func (p *jsonParser) str() (string, error) {
	p.pos++
	var b strings.Builder
	for {
		if p.pos >= len(p.src) {
			return "", p.errorf("unterminated string")
		}
		c := p.src[p.pos]
		switch {
		case c == '"':
			p.pos++
			return b.String(), nil
		case c < 0x20:
			return "", p.errorf("control character in string")
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			b.WriteRune(r)
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.src[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.errorf("invalid UTF-8")
			}
			b.WriteRune(r)
			p.pos += size
		}
	}
}

// escape decodes one backslash escape, joining UTF-16 surrogate pairs and rejecting lone surrogates.
func (p *jsonParser) escape() (rune, error) {
	if p.pos+1 >= len(p.src) {
		return 0, p.errorf("unterminated escape")
	}
	c := p.src[p.pos+1]
	p.pos += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r1, err := p.hex4()
		if err != nil {
			return 0, err
		}
		if !utf16.IsSurrogate(r1) {
			return r1, nil
		}
		if r1 >= 0xDC00 || p.pos+1 >= len(p.src) || p.src[p.pos] != '\\' || p.src[p.pos+1] != 'u' {
			return 0, p.errorf("lone surrogate")
		}
		p.pos += 2
		r2, err := p.hex4()
		if err != nil {
			return 0, err
		}
		r := utf16.DecodeRune(r1, r2)
		if r == utf8.RuneError {
			return 0, p.errorf("lone surrogate")
		}
		return r, nil
	}
	return 0, p.errorf("invalid escape \\%c", c)
}

func (p *jsonParser) hex4() (rune, error) {
	if p.pos+4 > len(p.src) {
		return 0, p.errorf("short \\u escape")
	}
	v, err := strconv.ParseUint(string(p.src[p.pos:p.pos+4]), 16, 16)
	if err != nil {
		return 0, p.errorf("bad \\u escape")
	}
	p.pos += 4
	return rune(v), nil
}

// number parses an RFC 8259 number and writes its ECMAScript form.
func (p *jsonParser) number(out *strings.Builder) error {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.src[p.pos] == '-' {
		p.pos++
	}
	if p.pos < len(p.src) && p.src[p.pos] == '0' {
		p.pos++
	} else if digits() == 0 {
		return p.errorf("bad number")
	}
	if p.pos < len(p.src) && p.src[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return p.errorf("bad fraction")
		}
	}
	if p.pos < len(p.src) && (p.src[p.pos] == 'e' || p.src[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.src) && (p.src[p.pos] == '+' || p.src[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return p.errorf("bad exponent")
		}
	}
	f, err := strconv.ParseFloat(string(p.src[start:p.pos]), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return p.errorf("bad number: %v", err)
	}
	if math.IsInf(f, 0) {
		return p.errorf("number out of IEEE-754 double range")
	}
	out.WriteString(formatES6Number(f))
	return nil
}

// writeJSONString writes s with the escaping of ECMAScript JSON.stringify (RFC 8785 section 3.2.2.2).
func writeJSONString(out *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	out.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			out.WriteString(`\"`)
		case '\\':
			out.WriteString(`\\`)
		case '\b':
			out.WriteString(`\b`)
		case '\f':
			out.WriteString(`\f`)
		case '\n':
			out.WriteString(`\n`)
		case '\r':
			out.WriteString(`\r`)
		case '\t':
			out.WriteString(`\t`)
		default:
			if c < 0x20 {
				out.WriteString(`\u00`)
				out.WriteByte(hex[c>>4])
				out.WriteByte(hex[c&15])
			} else {
				out.WriteByte(c)
			}
		}
	}
	out.WriteByte('"')
}

// formatES6Number renders a finite double the way ECMAScript's Number.prototype.toString does: the shortest digit
// string that round-trips, in plain notation for exponents from -7 to 20 and in exponent notation otherwise.
func formatES6Number(f float64) string {
	if f == 0 {
		return "0" // also for -0
	}
	var b strings.Builder
	if f < 0 {
		b.WriteByte('-')
		f = -f
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddddde±XX
	mant, expPart, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expPart)
	k := len(digits)
	n := exp + 1 // value = 0.digits × 10^n
	switch {
	case k <= n && n <= 21:
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", n-k))
	case 0 < n && n <= 21:
		b.WriteString(digits[:n])
		b.WriteByte('.')
		b.WriteString(digits[n:])
	case -6 < n && n <= 0:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -n))
		b.WriteString(digits)
	default:
		b.WriteByte(digits[0])
		if k > 1 {
			b.WriteByte('.')
			b.WriteString(digits[1:])
		}
		b.WriteByte('e')
		if n-1 >= 0 {
			b.WriteByte('+')
		}
		b.WriteString(strconv.Itoa(n - 1))
	}
	return b.String()
}
