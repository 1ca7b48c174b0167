package whsign

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// verifyCase is one delivery an independent verifier checks with one secret.
type verifyCase struct {
	Name    string            `json:"name"`
	Secret  string            `json:"secret"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	// Want: [standard verifies, etchv verifies]
	Want [2]bool `json:"-"`
}

// docSnippet returns the fenced block that follows `<!-- verify:lang -->` in docs/webhooks.md: the test runs
// the very code the documentation shows.
func docSnippet(t *testing.T, lang string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "webhooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- verify:" + lang + " -->\\s*```" + lang + "\n(.*?)```")
	m := re.FindSubmatch(doc)
	if m == nil {
		t.Fatalf("docs/webhooks.md has no verify:%s block", lang)
	}
	return string(m[1])
}

func verifyCases(t *testing.T) []verifyCase {
	t.Helper()
	current, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	previous, _ := NewSecret()
	body := `{"id":"evt_` + strings.Repeat("ab", 32) + `","type":"watermark.embed.succeeded","data":{"n":"é"}}`
	id := "evt_" + strings.Repeat("ab", 32)
	now := time.Now()
	signed := func(secrets []string, at time.Time) map[string]string {
		hs, err := Sign(secrets, id, at, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, h := range hs {
			m[h.Name] = h.Value
		}
		return m
	}
	rotated := signed([]string{current, previous}, now)
	withPrevious := map[string]string{}
	for k, v := range rotated {
		withPrevious[k] = v
	}
	withPrevious[HeaderEtchvSignature] = rotated[HeaderPreviousSignature]
	return []verifyCase{
		{Name: "current secret", Secret: current, Headers: rotated, Body: body, Want: [2]bool{true, true}},
		{Name: "previous secret during rotation", Secret: previous, Headers: rotated, Body: body, Want: [2]bool{true, false}},
		{Name: "previous secret, previous-signature header", Secret: previous, Headers: withPrevious, Body: body, Want: [2]bool{true, true}},
		{Name: "body changed", Secret: current, Headers: rotated, Body: strings.Replace(body, "embed", "detect", 1), Want: [2]bool{false, false}},
		{Name: "other secret", Secret: "whsec_" + strings.Repeat("A", 32), Headers: rotated, Body: body, Want: [2]bool{false, false}},
		{Name: "stale timestamp", Secret: current, Headers: signed([]string{current}, now.Add(-10*time.Minute)), Body: body, Want: [2]bool{false, false}},
	}
}

// runVerifier writes the cases, runs cmd with WH_CASES pointing at them and decodes its output: one
// [standard, etchv] pair per case.
func runVerifier(t *testing.T, cases []verifyCase, name string, args ...string) [][2]bool {
	t.Helper()
	dir := t.TempDir()
	in, _ := json.Marshal(cases)
	path := filepath.Join(dir, "cases.json")
	if err := os.WriteFile(path, in, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "WH_CASES="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	var got [][2]bool
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(cases) {
		t.Fatalf("%s printed %q, want %d pairs (%v)", name, out, len(cases), err)
	}
	return got
}

func checkVerdicts(t *testing.T, lang string, cases []verifyCase, got [][2]bool) {
	t.Helper()
	for i, c := range cases {
		if got[i] != c.Want {
			t.Errorf("%s, %s: standard/etchv verified %v, want %v", lang, c.Name, got[i], c.Want)
		}
	}
}

// TestIndependentVerification runs the verification code of docs/webhooks.md (Go, Python, JavaScript: written
// from the schemes' text, sharing no code with this package) on deliveries this package signed, with the
// secret of a rotation's both sides, a changed body, another secret and a stale timestamp. Python and Node are
// used when installed; the Go example always runs.
func TestIndependentVerification(t *testing.T) {
	cases := verifyCases(t)
	// Our own verifiers agree with the independent ones.
	for _, c := range cases {
		get := func(n string) string { return c.Headers[n] }
		got := [2]bool{VerifyStandard(c.Secret, get, []byte(c.Body), time.Now()) == nil,
			VerifyEtchv(c.Secret, get, []byte(c.Body), time.Now()) == nil}
		if got != c.Want {
			t.Errorf("whsign, %s: %v, want %v", c.Name, got, c.Want)
		}
	}
	t.Run("go", func(t *testing.T) {
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		dir := t.TempDir()
		snippet := strings.Replace(docSnippet(t, "go"), "package webhookverify", "package main", 1)
		if err := os.WriteFile(filepath.Join(dir, "verify.go"), []byte(snippet), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(goHarness), 0o600); err != nil {
			t.Fatal(err)
		}
		got := runVerifier(t, cases, goBin, "run", filepath.Join(dir, "verify.go"), filepath.Join(dir, "main.go"))
		checkVerdicts(t, "go", cases, got)
	})
	t.Run("python", func(t *testing.T) {
		py, err := exec.LookPath("python3")
		if err != nil {
			t.Skip("python3 is not installed")
		}
		checkVerdicts(t, "python", cases, runVerifier(t, cases, py, "-c", docSnippet(t, "python")+pyHarness))
	})
	t.Run("javascript", func(t *testing.T) {
		node, err := exec.LookPath("node")
		if err != nil {
			t.Skip("node is not installed")
		}
		checkVerdicts(t, "javascript", cases, runVerifier(t, cases, node, "-e", docSnippet(t, "javascript")+jsHarness))
	})
}

const goHarness = `package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"
)

func main() {
	raw, err := os.ReadFile(os.Getenv("WH_CASES"))
	if err != nil {
		panic(err)
	}
	var cases []struct {
		Secret  string            ` + "`json:\"secret\"`" + `
		Headers map[string]string ` + "`json:\"headers\"`" + `
		Body    string            ` + "`json:\"body\"`" + `
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		panic(err)
	}
	var out [][2]bool
	for _, c := range cases {
		h := http.Header{}
		for k, v := range c.Headers {
			h.Set(k, v)
		}
		out = append(out, [2]bool{VerifyStandard(c.Secret, h, []byte(c.Body), time.Now()), VerifyEtchv(c.Secret, h, []byte(c.Body), time.Now())})
	}
	b, _ := json.Marshal(out)
	fmt.Print(string(b))
}
`

const pyHarness = `

import json as _json, os as _os
_out = []
for _c in _json.load(open(_os.environ["WH_CASES"])):
    _b = _c["body"].encode()
    _out.append([verify_standard(_c["secret"], _c["headers"], _b), verify_etchv(_c["secret"], _c["headers"], _b)])
print(_json.dumps(_out), end="")
`

const jsHarness = `
;(() => {
  const cases = JSON.parse(require("node:fs").readFileSync(process.env.WH_CASES, "utf8"));
  const out = cases.map((c) => {
    const headers = Object.fromEntries(Object.entries(c.headers).map(([k, v]) => [k.toLowerCase(), v]));
    const body = Buffer.from(c.body, "utf8");
    return [verifyStandard(c.secret, headers, body), verifyEtchv(c.secret, headers, body)];
  });
  process.stdout.write(JSON.stringify(out));
})();
`
