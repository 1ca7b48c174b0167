package console

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestStylesheetContrast computes the WCAG 2 contrast ratio of the stylesheet's text colours on their
// backgrounds: every rule that sets both a colour and a background, and the pairs that meet by inheritance
// (text, hints and links on the page and on panels). Text must reach AA, 4.5:1.
func TestStylesheetContrast(t *testing.T) {
	css, err := staticFS.ReadFile("static/console.css")
	if err != nil {
		t.Fatal(err)
	}
	css = regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAll(css, nil)
	vars := map[string]string{}
	for _, m := range regexp.MustCompile(`--([a-z-]+):\s*(#[0-9a-fA-F]{3,6})`).FindAllStringSubmatch(string(css), -1) {
		vars[m[1]] = m[2]
	}
	resolve := func(v string) (string, bool) {
		v = strings.TrimSpace(v)
		if m := regexp.MustCompile(`^var\(--([a-z-]+)\)$`).FindStringSubmatch(v); m != nil {
			v = vars[m[1]]
		}
		switch v {
		case "#fff", "#ffffff", "white":
			return "#ffffff", true
		}
		return v, regexp.MustCompile(`^#[0-9a-fA-F]{6}$`).MatchString(v)
	}
	type pair struct{ where, fg, bg string }
	var pairs []pair
	rules := regexp.MustCompile(`([^{}]+)\{([^{}]*)\}`).FindAllStringSubmatch(string(css), -1)
	for _, r := range rules {
		var fg, bg string
		for _, d := range strings.Split(r[2], ";") {
			k, v, ok := strings.Cut(d, ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "color":
				fg = v
			case "background", "background-color":
				bg = v
			}
		}
		if fg == "" || bg == "" || strings.TrimSpace(bg) == "none" {
			continue
		}
		pairs = append(pairs, pair{strings.TrimSpace(r[1]), fg, bg})
	}
	if len(pairs) < 8 {
		t.Fatalf("found only %d colour pairs in the stylesheet: is the parser still right?", len(pairs))
	}
	// Inherited: body text, hints and links on the page and on panels; header links and the sign-out
	// button on the header's background; danger buttons on white.
	pairs = append(pairs,
		pair{"text on panels", "var(--fg)", "var(--panel)"},
		pair{"hints on the page", "var(--muted)", "var(--bg)"},
		pair{"hints on panels", "var(--muted)", "var(--panel)"},
		pair{"links on the page", "var(--accent)", "var(--bg)"},
		pair{"links on panels", "var(--accent)", "var(--panel)"},
		pair{"links in secret cards", "var(--accent)", "#eaf2fb"},
		pair{"header links", "#ffffff", "#14213d"},
		pair{"danger buttons", "var(--danger)", "#ffffff"},
		pair{"ok status on the page", "var(--ok)", "var(--bg)"},
		pair{"chart bars on their panel", "var(--accent)", "var(--panel)"},
	)
	for _, p := range pairs {
		fg, ok1 := resolve(p.fg)
		bg, ok2 := resolve(p.bg)
		if !ok1 || !ok2 {
			t.Errorf("%s: cannot read the colours %q on %q", p.where, p.fg, p.bg)
			continue
		}
		ratio := contrast(t, fg, bg)
		t.Logf("%-40s %s on %s: %.2f:1", p.where, fg, bg, ratio)
		if ratio < 4.5 {
			t.Errorf("%s: %s on %s is %.2f:1, below WCAG AA's 4.5:1", p.where, fg, bg, ratio)
		}
	}
}

func TestContrastFormula(t *testing.T) {
	// Known values: black on white is 21:1, white on white 1:1, #767676 on white just passes AA (4.54:1).
	for _, c := range []struct {
		fg, bg string
		want   float64
	}{{"#000000", "#ffffff", 21}, {"#ffffff", "#ffffff", 1}, {"#767676", "#ffffff", 4.54}} {
		if got := contrast(t, c.fg, c.bg); math.Abs(got-c.want) > 0.01 {
			t.Fatalf("%s on %s: %.3f, want %.2f", c.fg, c.bg, got, c.want)
		}
	}
}

// contrast is WCAG 2's (L1 + 0.05) / (L2 + 0.05) of the relative luminances.
func contrast(t *testing.T, a, b string) float64 {
	la, lb := luminance(t, a), luminance(t, b)
	return (math.Max(la, lb) + 0.05) / (math.Min(la, lb) + 0.05)
}

func luminance(t *testing.T, hex string) float64 {
	var ch [3]float64
	for i := range ch {
		v, err := strconv.ParseUint(hex[1+2*i:3+2*i], 16, 8)
		if err != nil {
			t.Fatal(fmt.Errorf("colour %s: %w", hex, err))
		}
		s := float64(v) / 255
		if s <= 0.04045 {
			ch[i] = s / 12.92
		} else {
			ch[i] = math.Pow((s+0.055)/1.055, 2.4)
		}
	}
	return 0.2126*ch[0] + 0.7152*ch[1] + 0.0722*ch[2]
}
