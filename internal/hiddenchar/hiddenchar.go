// Package hiddenchar is the one rule for characters that a name, description or address someone chooses may
// not hold: those that show nothing or change how the text around them is displayed. Bidirectional controls
// (U+202E turns "Acme\u202Egnp.exe" into "Acmeexe.png"), zero-width spaces, the byte order mark, other format
// and control characters, line and paragraph separators, private-use and unassigned code points. Two strings
// that differ only by them look the same in the console, a CLI listing or a log, so such a name could pass for
// another; refusing says so at once, where stripping would store something other than what was typed.
//
// It owns the rule and the error that names the character. It does not decide which fields are checked (the
// owner of each field calls it when the field is set, never when a stored record is read, so records from
// before a rule still load), and it changes no chosen text. Text a remote server chose (an error message an S3
// endpoint or a webhook receiver's TLS certificate put in an error) is another matter: nobody typed it and
// nobody compares it, so Remote escapes and bounds it once, before it is stored, rather than every reader
// having to.
package hiddenchar

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Error refuses a string for the hidden character Rune; it wraps What (the owner's error for the field, so
// errors.Is still finds it).
type Error struct {
	What error
	Rune rune
}

func (e *Error) Error() string {
	return fmt.Sprintf("%v: it holds %s", e.What, Describe(e.Rune))
}

func (e *Error) Unwrap() error { return e.What }

// Describe names r for a person who cannot see it: "U+202E, a character that shows nothing or reorders the
// text around it".
func Describe(r rune) string {
	return fmt.Sprintf("%U, a character that shows nothing or reorders the text around it", r)
}

// Zero-width non-joiner and joiner are format characters that written words need (Persian, the Indic scripts,
// emoji sequences): a name keeps them.
const (
	zeroWidthNonJoiner = '\u200c'
	zeroWidthJoiner    = '\u200d'
)

// Hidden reports whether a name or description may not hold r: anything not graphic (spaces, Zs, are), except
// the two joiners.
func Hidden(r rune) bool {
	return !unicode.IsGraphic(r) && r != zeroWidthNonJoiner && r != zeroWidthJoiner
}

// InName is the first rune of s that a name or description may not hold (ok false when none): see Hidden.
func InName(s string) (r rune, ok bool) {
	for _, r := range s {
		if Hidden(r) {
			return r, true
		}
	}
	return 0, false
}

// InAddress is the first rune of s that a string without spaces (an email address, a URL, a host name, a
// bucket, a key id) may not hold: anything not graphic, and any space (U+00A0 and U+3000 look like none is
// there, or like an ordinary one).
func InAddress(s string) (r rune, ok bool) {
	for _, r := range s {
		if !unicode.IsGraphic(r) || unicode.IsSpace(r) {
			return r, true
		}
	}
	return 0, false
}

// Name returns a *Error wrapping what when s holds a rune InName refuses, else nil.
func Name(what error, s string) error {
	if r, found := InName(s); found {
		return &Error{What: what, Rune: r}
	}
	return nil
}

// Address returns a *Error wrapping what when s holds a rune InAddress refuses, else nil.
func Address(what error, s string) error {
	if r, found := InAddress(s); found {
		return &Error{What: what, Rune: r}
	}
	return nil
}

// Escape is s with each character Hidden reports written as its Go escape (`\u202e`, `\t`), for a listing
// that cannot isolate a value, such as a terminal's: a name stored before a rule refused it then shows what it
// holds instead of reordering, or splitting, the line it is printed on. Other characters are unchanged.
func Escape(s string) string {
	if _, found := InName(s); !found {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !Hidden(r):
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	return b.String()
}

// RemoteLimit is the most bytes of text a remote server chose (an S3 endpoint's error message, a webhook
// receiver's TLS certificate names) that a record keeps: a hostile server may send megabytes.
const RemoteLimit = 1024

// Remote is text a remote server chose, made fit to store and show: its hidden characters escaped as Escape
// writes them (an ANSI escape sequence or a right-to-left override then reaches no terminal, log or page as
// itself, whichever client reads the record), bytes that are not UTF-8 replaced by U+FFFD, and the whole cut
// on a character boundary to at most limit bytes, "…" marking a cut. The escaping comes before the cut, so a
// cut never splits an escape. No character is written shorter than it was read, so Remote reads at most
// limit+4 bytes of s: its cost is bounded whatever the server sent.
func Remote(s string, limit int) string {
	const cut = "…"
	if len(s) <= limit && utf8.ValidString(s) {
		if _, found := InName(s); !found {
			return s
		}
	}
	if len(s) > limit+utf8.UTFMax {
		s = s[:limit+utf8.UTFMax]
	}
	var whole strings.Builder
	for _, r := range s {
		whole.WriteString(written(r))
	}
	if whole.Len() <= limit && len(s) <= limit {
		return whole.String()
	}
	var b strings.Builder
	for _, r := range s {
		form := written(r)
		if b.Len()+len(form)+len(cut) > limit {
			break
		}
		b.WriteString(form)
	}
	return b.String() + cut
}

// written is r as Remote stores it: escaped when Hidden, U+FFFD for a byte that is not UTF-8.
func written(r rune) string {
	if Hidden(r) {
		return Escape(string(r))
	}
	return string(r)
}
