package accounts

import (
	"fmt"
	"unicode"
)

// HiddenRuneError refuses an email address or an organization name that holds a character which shows
// nothing or changes how the text around it is displayed: bidirectional controls (U+202E turns
// "Acme\u202Egnp.exe" into "Acmeexe.png"), zero-width spaces, the byte order mark, other format and control
// characters, line separators and private-use or unassigned code points. Two strings that differ only by them
// look the same in the console and in a log, so such a name could pass for another; refusing says so at once,
// where stripping would store something other than what was typed. It wraps What (ErrBadEmail, ErrBadOrgName).
type HiddenRuneError struct {
	What error
	Rune rune
}

func (e *HiddenRuneError) Error() string {
	return fmt.Sprintf("%v: it holds %U, a character that shows nothing or reorders the text around it", e.What, e.Rune)
}

func (e *HiddenRuneError) Unwrap() error { return e.What }

// Zero-width non-joiner and joiner are format characters that written words need (Persian, the Indic scripts,
// emoji sequences): a name keeps them.
const (
	zeroWidthNonJoiner = '\u200c'
	zeroWidthJoiner    = '\u200d'
)

// hiddenInName is the first rune of s that an organization name may not hold (ok false when none): spaces
// (Zs) are kept, as are the two joiners.
func hiddenInName(s string) (rune, bool) {
	for _, r := range s {
		if !unicode.IsGraphic(r) && r != zeroWidthNonJoiner && r != zeroWidthJoiner {
			return r, true
		}
	}
	return 0, false
}

// hiddenInEmail is the first rune of s that an email address may not hold: anything not graphic, and any
// space (an address has none; U+00A0 and U+3000 look like one).
func hiddenInEmail(s string) (rune, bool) {
	for _, r := range s {
		if !unicode.IsGraphic(r) || unicode.IsSpace(r) {
			return r, true
		}
	}
	return 0, false
}
