package hiddenchar

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

var errField = errors.New("name")

// TestNameRule: what a name refuses (naming the character) and keeps (spaces of every script, the joiners).
func TestNameRule(t *testing.T) {
	for bad, r := range map[string]rune{"Acme\u202egnp.exe": 0x202e, "Ac\u200bme": 0x200b, "\ufeffAcme": 0xfeff,
		"Acme\u2028Labs": 0x2028, "Acme\u2066Labs": 0x2066, "Acme\ue000": 0xe000, "Acme\u00adLabs": 0xad,
		"a\nb": '\n', "a\x00b": 0, "tab\there": '\t', "\U000e0001tag": 0xe0001, "un\U0003fffeassigned": 0x3fffe} {
		err := Name(errField, bad)
		var h *Error
		if !errors.Is(err, errField) || !errors.As(err, &h) || h.Rune != r {
			t.Errorf("%+q: %v, want an Error for %U", bad, err, r)
		}
		if err != nil && !strings.Contains(err.Error(), Describe(r)) {
			t.Errorf("%+q: %q does not name the character", bad, err)
		}
	}
	for _, good := range []string{"می\u200cخواهم", "Café Ünïcode", "東京\u3000スタジオ", "👩\u200d💻 Labs", "a\u00a0b", ""} {
		if err := Name(errField, good); err != nil {
			t.Errorf("%+q: %v", good, err)
		}
	}
}

// TestAddressRule: an address also refuses every kind of space.
func TestAddressRule(t *testing.T) {
	for bad, r := range map[string]rune{"a b@x": ' ', "a\u00a0b@x": 0xa0, "x\u3000y": 0x3000, "x\u202ey": 0x202e, "x\u200dy": 0x200d} {
		if got, found := InAddress(bad); !found || got != r {
			t.Errorf("%+q: %U %v, want %U", bad, got, found, r)
		}
	}
	if err := Address(errField, "https://example.com/hook?a=é"); err != nil {
		t.Error(err)
	}
}

// TestEscape: hidden characters are written as escapes, everything else (joiners included) as it is.
func TestEscape(t *testing.T) {
	for in, want := range map[string]string{"Acme\u202egnp.exe": `Acme\u202egnp.exe`, "a\tb\nc": `a\tb\nc`, "x\U000e0001": `x\U000e0001`,
		"👩\u200d💻 Café": "👩\u200d💻 Café", "a\x00": `a\u0000`} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%+q) = %q, want %q", in, got, want)
		}
	}
}

// TestRemote: text a remote server chose is stored with its escape sequences and overrides escaped, bytes that
// are not UTF-8 replaced, and a megabyte cut to the limit on a character boundary, the cut marked; text that
// needs none of it is kept as it is.
func TestRemote(t *testing.T) {
	for in, want := range map[string]string{
		"HTTP 500 Internal Server Error": "HTTP 500 Internal Server Error",
		"\x1b[31mred\x1b]52;c;aGk=\a":    `\u001b[31mred\u001b]52;c;aGk=\u0007`,
		"evil\u202egnp.exe\r\nnext\x9bx": `evil\u202egnp.exe\r\nnext` + "\ufffdx",
		"ab\xffc":                        "ab\ufffdc",
	} {
		if got := Remote(in, 64); got != want {
			t.Errorf("Remote(%+q) = %+q, want %+q", in, got, want)
		}
	}
	huge := strings.Repeat("é\x1b", 1<<20)
	got := Remote(huge, RemoteLimit)
	if len(got) > RemoteLimit || !strings.HasSuffix(got, "…") || !utf8.ValidString(got) || strings.ContainsRune(got, 0x1b) {
		t.Fatalf("a megabyte became %d bytes ending %+q", len(got), got[len(got)-16:])
	}
	kept := strings.TrimSuffix(got, "…")
	if !strings.HasPrefix(Escape(huge[:2*RemoteLimit]), kept) || !(strings.HasSuffix(kept, "é") || strings.HasSuffix(kept, `\u001b`)) {
		t.Errorf("the cut split a character or an escape: ends %+q", got[len(got)-16:])
	}
	if got := Remote(strings.Repeat("x", 10), 10); got != strings.Repeat("x", 10) {
		t.Errorf("text of exactly the limit was cut: %q", got)
	}
	if got := Remote(strings.Repeat("x", 11), 10); got != "xxxxxxx…" {
		t.Errorf("text one over the limit: %q", got)
	}
}
