package consolebrowser_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"filigrane/actors"
	"filigrane/actors/storagedest"
	"filigrane/actors/webhooks"
	"filigrane/internal/admin"
	"filigrane/internal/clock"
	"filigrane/internal/hiddenchar"
	"filigrane/internal/recordtest"
)

// hostile is what a hostile API client, member or invitee puts in the fields they control: markup that adds an
// element (data-xss) or runs script (window.__xss) wherever a page inserts it as HTML, the ends of the elements
// a value may sit in, a javascript: address, and a right-to-left override (U+202E) followed by text it
// reverses.
const hostile = `"'><img src=x onerror="window.__xss=1" data-xss=1><script data-xss=1>window.__xss=1</script>` +
	`</textarea></title><b data-xss=1>x</b>javascript:alert(1)` + "\u202e" + `gpj.exe`

// TestConsoleShowsHostileValuesAsText puts hostile values into what API clients, members and invitees control
// (a marked file's name and data, an asset's name and metadata keys and values, webhook URLs, a storage
// destination's name and prefix, 190-character names without a space, key and member names, an organization's
// name, a request id in the address) and opens every page that shows them in Chromium, on a phone's width.
// On every page: no element or script of theirs, no dialog, no content security policy violation (the policy
// stops what got through, so a violation means something did), only http(s) links and forms, no sideways
// scrolling. Their text stays theirs: the metadata editor holds the values as they were sent, the mark
// form's data names an organization with quotes as valid JSON, and a right-to-left override in an
// organization's or destination's name reverses nothing outside it (the role after the organization in the
// header, the sentence around a destination's name). The page's own script cannot insert a string as HTML
// (Trusted Types), and an answer under /console/api shown as a document runs in an origin of its own, while
// the files it serves still download (the asset's file, the job's result).
func TestConsoleShowsHostileValuesAsText(t *testing.T) {
	exe := chromium(t)
	n := startNode(t, "hostile")
	base := "http://" + n.APIAddr()
	dev := n.DevOrg
	bg := context.Background()
	api := func(method, path, ctype string, body []byte) (http.Header, string) {
		t.Helper()
		h, b, st := apiDo(t, method, base+path, dev.Secret, ctype, body)
		if st/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, st, b)
		}
		return h, b
	}

	// Seeded as their authors would: a member (an invitee's name is their email, free text here), a key a
	// member named, a file marked with a hostile name and data and then renamed with hostile metadata, webhook
	// endpoints and storage destinations with hostile and overlong names. Names, descriptions and prefixes
	// refuse the right-to-left override now (internal/hiddenchar), so those are made without it and then given
	// it in their stored records, as ones made before that rule: they must still be shown isolated.
	withoutOverride := strings.ReplaceAll(hostile, "\u202e", "")
	adm := admin.Admin{Store: n.Store(), Clock: clock.System{}, Catalog: actors.DefaultCatalog()}
	if _, err := adm.AddMember(bg, dev.OrgID, hostile, actors.RoleMember); err == nil {
		t.Fatal("a member name with a right-to-left override was not refused")
	}
	memberID, err := adm.AddMember(bg, dev.OrgID, withoutOverride, actors.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	orgs := actors.Orgs{Store: n.Store(), Clock: clock.System{}}
	if _, err := orgs.Update(bg, dev.OrgID, func(st *actors.OrgState) error {
		for i := range st.Members {
			if st.Members[i].ID == memberID {
				st.Members[i].Name = hostile
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("W", 190)
	for _, name := range []string{withoutOverride, long[:100]} {
		_, key, err := adm.CreateKey(bg, actors.NewKeySpec{OrgID: dev.OrgID, MemberID: dev.MemberID, Name: name, Scopes: actors.AllScopes()})
		if err != nil {
			t.Fatal(err)
		}
		if name == withoutOverride {
			recordtest.Rewrite(t, n.Store(), "apikey/"+key.ID, func(k *actors.APIKey) { k.Name = hostile })
		}
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	_ = mw.WriteField("data", `{"note": `+jsonString(hostile)+`}`)
	fw, _ := mw.CreateFormFile("file", hostile+".png")
	_, _ = fw.Write(texturedImage(t, 256))
	_ = mw.Close()
	hdr, _ := api("POST", "/watermarks/images", mw.FormDataContentType(), form.Bytes())
	assetID := hdr.Get("X-Asset-ID")
	_, body := api("GET", "/assets/"+assetID, "", nil)
	var as struct{ Version int64 }
	if err := json.Unmarshal([]byte(body), &as); err != nil {
		t.Fatal(err)
	}
	// Asset names refuse U+202E (printable characters only); metadata keys are at most 100 characters.
	metaKey := `"><b data-xss=1>k</b>`
	api("PATCH", "/assets/"+assetID, "application/json", fmt.Appendf(nil, `{"version": %d, "name": %s, "metadata": {%s: %s}}`,
		as.Version, jsonString(withoutOverride), jsonString(metaKey), jsonString(hostile)))
	for _, u := range []string{`https://example.com/"><img src=x data-xss=1>`, "https://example.com/" + long} {
		api("POST", "/webhooks", "application/json", []byte(`{"url": `+jsonString(u)+`, "description": `+jsonString(withoutOverride)+`}`))
	}
	recordtest.Rewrite(t, n.Store(), "webhooks/"+dev.OrgID, func(rec *webhooks.OrgEndpoints) {
		eps := append([]webhooks.Endpoint(nil), rec.Endpoints...)
		for i := range eps {
			eps[i].Description = hostile
		}
		rec.Endpoints = eps
	})
	for _, d := range []struct{ name, prefix string }{{withoutOverride, withoutOverride}, {long, strings.Repeat("p", 500)}} {
		b, _ := json.Marshal(map[string]any{"name": d.name, "provider": "s3", "endpoint": "127.0.0.1:9", "bucket": "acme-results",
			"prefix": d.prefix, "access_key_id": "AKIAEXAMPLE", "secret_access_key": "not a real secret"})
		api("POST", "/storage/destinations", "application/json", b)
	}
	// Its last_error is text a remote S3 server chose: stored escaped now (internal/hiddenchar.Remote), it is
	// given raw markup, an override and a terminal escape sequence here, as one stored before that rule.
	var hostileDst string
	recordtest.Rewrite(t, n.Store(), "storage/dst/"+dev.OrgID, func(set *storagedest.Set) {
		ds := append([]storagedest.Destination(nil), set.Destinations...)
		ds[0].Name, ds[0].Prefix, ds[0].LastError = hostile, hostile, "write: "+hostile+"\x1b[2J"
		hostileDst = ds[0].ID
		set.Destinations = ds
	})

	browserOut := &tailBuffer{max: 8 << 10}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.CombinedOutput(browserOut))...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 120*time.Second)
	defer cancelT()
	defer func() {
		if t.Failed() {
			failurePage(t, ctx, "")
			t.Logf("the browser's output (its last %d bytes):\n%s", browserOut.max, browserOut.String())
		}
	}()
	// Before any page's script: dialogs and policy violations are recorded instead of shown.
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `
		window.__seen = [];
		for (const f of ["alert", "confirm", "prompt"]) window[f] = (m) => { window.__seen.push(f + ": " + m); return false; };
		document.addEventListener("securitypolicyviolation", (e) => window.__seen.push("policy " + e.violatedDirective + " " + e.blockedURI));`}); err != nil {
		t.Fatal(err)
	}
	do := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	eval := func(js string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("evaluate %s: %v", js, err)
		}
		return s
	}
	// clean fails unless the page shows the hostile values as text only.
	clean := func(where string) {
		t.Helper()
		got := eval(`JSON.stringify({
			elements: document.querySelectorAll("[data-xss]").length,
			ran: window.__xss || 0,
			seen: window.__seen,
			inlineScripts: [...document.scripts].filter(s => !s.src).length,
			otherLinks: [...document.querySelectorAll("a[href]")].map(a => a.href).concat([...document.forms].map(f => f.action))
				.filter(u => !/^https?:/.test(u)),
			frames: document.querySelectorAll("iframe, frame, object, embed").length,
			width: document.documentElement.scrollWidth })`)
		if want := `{"elements":0,"ran":0,"seen":[],"inlineScripts":0,"otherLinks":[],"frames":0,"width":390}`; got != want {
			t.Fatalf("%s: %s, want %s", where, got, want)
		}
	}
	waitFor := func(js string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if err := chromedp.Do(wctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingMutation())); err != nil {
			t.Fatalf("waiting for %s: %v", js, err)
		}
	}
	visit := func(path, ready string) {
		t.Helper()
		do("open "+path, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.CSS(ready)))
		clean(path)
	}
	// leftToRight tells whether word, in the element sel's text, is drawn left to right (its first letter left
	// of its last): a right-to-left override that leaked out of a name before it would draw it reversed.
	leftToRight := func(sel, word string) string {
		t.Helper()
		return eval(`((sel, word) => {
			const nodes = [], w = document.createTreeWalker(document.querySelector(sel), NodeFilter.SHOW_TEXT);
			for (let n; (n = w.nextNode()); ) nodes.push(n);
			const all = nodes.map((n) => n.data).join(""), i = all.indexOf(word);
			if (i < 0) return "not found in " + JSON.stringify(all);
			const at = (k) => { for (const n of nodes) { if (k < n.data.length) return [n, k]; k -= n.data.length; } };
			const left = (k) => { const r = document.createRange(); r.setStart(...at(k)); r.setEnd(...at(k)); r.setEnd(r.startContainer, r.startOffset + 1); return r.getBoundingClientRect().left; };
			return String(left(i) < left(i + word.length - 1));
		})(` + jsonString(sel) + `, ` + jsonString(word) + `)`)
	}

	do("a phone's width", chromedp.EmulateViewport(390, 844))
	do("sign in", chromedp.Navigate(base+"/console/sign-in"), chromedp.WaitVisible(chromedp.CSS("#signin-form")),
		chromedp.SendKeys(chromedp.CSS("#email"), dev.ConsoleEmail), chromedp.SendKeys(chromedp.CSS("#password"), dev.ConsolePassword),
		chromedp.Submit(chromedp.CSS("#signin-form")), chromedp.WaitVisible(chromedp.CSS("#available")))
	clean("/console/usage")
	visit("/console/keys", "#keys")
	visit("/console/members", "#members")
	visit("/console/assets", "#assets[data-loaded] tbody tr")
	do("open the asset's editor", chromedp.Click(chromedp.CSS(`#assets tr[data-asset-id="`+assetID+`"] button[aria-expanded]`)),
		chromedp.WaitVisible(chromedp.CSS("#meta-"+assetID)))
	clean("the asset's editor")
	var meta map[string]string
	if err := json.Unmarshal([]byte(eval(`document.getElementById("meta-`+assetID+`").value`)), &meta); err != nil || len(meta) != 1 || meta[metaKey] != hostile {
		t.Fatalf("the metadata editor holds %v (%v), want {%q: %q}", meta, err, metaKey, hostile)
	}
	// Downloads through the console work under the API answers' sandbox: the asset's file from the assets
	// page, and the job's result from the jobs page.
	downloads := t.TempDir()
	if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads, EventsEnabled: &[]bool{true}[0]}); err != nil {
		t.Fatal(err)
	}
	download := func(what, link string) {
		t.Helper()
		dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		progress := chromedp.BrowserEvents(dctx, browser.DownloadProgress)
		do("download "+what, chromedp.Click(chromedp.CSS(link)))
		for ev, err := range progress {
			if err != nil {
				t.Fatalf("download %s: %v", what, err)
			}
			if ev.State == browser.DownloadProgressStateCanceled {
				t.Fatalf("download %s was cancelled", what)
			}
			if ev.State == browser.DownloadProgressStateCompleted {
				if ev.ReceivedBytes < 1000 {
					t.Fatalf("download %s: %v bytes", what, ev.ReceivedBytes)
				}
				return
			}
		}
	}
	download("the asset's file", `#assets tr[data-asset-id="`+assetID+`"] a[download]`)
	visit("/console/jobs", "#recent-jobs tbody tr .job-result a")
	download("the job's result", "#recent-jobs tbody tr .job-result a")
	visit("/console/jobs?request_id="+strings.NewReplacer("%", "%25", "&", "%26", "#", "%23", "+", "%2B", " ", "%20").Replace(hostile), "#job-result p")
	// A request id from a link's query that climbs out of its path segment ("../../../assets", %2F-encoded,
	// which the node decodes and resolves) is refused on the page, not called as another route.
	visit("/console/jobs?request_id=..%2F..%2F..%2Fassets", "#job-result > *")
	if got := eval(`document.querySelector("#job-result").textContent`); !strings.Contains(got, "not a request id") {
		t.Fatalf("a request id that leaves its path segment: %q", got)
	}
	visit("/console/webhooks", "#webhooks tbody tr + tr")
	do("a webhook's deliveries", chromedp.Click(chromedp.CSS(`#webhooks tbody tr button`)), chromedp.WaitVisible(chromedp.CSS("#deliveries p")))
	clean("webhook deliveries")
	visit("/console/storage", "#storage tbody tr + tr")
	// The remote server's error, stored before remote text was escaped on the way in, is text in a cell of its
	// own, escaped as the API answers it (its override and escape sequence spelled out, hiddenchar.Remote), and
	// reverses nothing after it (the row's Deliveries button).
	row := `#storage tr[data-destination-id="` + hostileDst + `"]`
	want := hiddenchar.Remote("write: "+hostile+"\x1b[2J", hiddenchar.RemoteLimit)
	if got := eval(`document.querySelector(` + jsonString(row+" td:nth-child(6)") + `).textContent`); got != want {
		t.Fatalf("the destination's last error shown as %+q, want %+q", got, want)
	}
	if got := leftToRight(row+" td:nth-child(7)", "Deliveries"); got != "true" {
		t.Fatalf("the button after a remote server's error is not drawn left to right (%s)", got)
	}
	// Its verification fails (a private address), with an error that names what was tried.
	do("verify the hostile destination", chromedp.Click(chromedp.CSS(`#storage button[aria-label^="Verify \"'><img"]`)))
	waitFor(`document.getElementById("storage-status").textContent.includes("storage_verification_failed")`)
	for _, name := range []string{`"'><img`, "WWWW"} {
		do("deliveries of "+name, chromedp.Click(chromedp.CSS(`#storage button[aria-label^="Deliveries to `+strings.ReplaceAll(name, `"`, `\"`)+`"]`)),
			chromedp.WaitVisible(chromedp.CSS("#storage-deliveries p")))
		clean("deliveries of " + name)
	}
	// Added from the form, a name with a right-to-left override is refused, the answer naming it; one without
	// is added, the sentence around its name in order.
	do("add a destination", chromedp.Click(chromedp.CSS("#storage-new summary")),
		chromedp.SetValue(chromedp.CSS("#st-name"), "results \u202etsop"), chromedp.SetValue(chromedp.CSS("#st-endpoint"), "127.0.0.1:9"),
		chromedp.SetValue(chromedp.CSS("#st-bucket"), "acme-results"), chromedp.SetValue(chromedp.CSS("#st-akid"), "AKIAEXAMPLE"),
		chromedp.SetValue(chromedp.CSS("#st-secret"), "not a real secret"), chromedp.Click(chromedp.CSS(`#storage-form button[type="submit"]`)))
	waitFor(`document.getElementById("storage-status").textContent.includes("U+202E")`)
	do("add a destination without the override", chromedp.SetValue(chromedp.CSS("#st-name"), "results טסופ"),
		chromedp.Click(chromedp.CSS(`#storage-form button[type="submit"]`)))
	waitFor(`document.getElementById("storage-status").textContent.includes("Verify it before")`)
	clean("a destination added")
	if got := leftToRight("#storage-status", "Verify"); got != "true" {
		t.Fatalf("the sentence after a destination's name is not drawn left to right (%s)", got)
	}
	visit("/console/batches", "#batches-status")

	// An organization with quotes, a backslash, a long word and a right-to-left override in its name. The
	// console refuses the override, naming it (internal/accounts: hidden characters), so the organization is
	// made without it and then given it in its record, as one named before that rule: it is still shown isolated.
	org := "Q \"Co\" \\ " + long[:60] + " \u202eowner"
	do("name an organization with an override", chromedp.Navigate(base+"/console/orgs"), chromedp.WaitVisible(chromedp.CSS("#org-form")),
		chromedp.SetValue(chromedp.CSS("#org-name"), org), chromedp.Submit(chromedp.CSS("#org-form")), chromedp.WaitVisible(chromedp.CSS("#page-error")))
	if got := eval(`document.getElementById("page-error").textContent`); !strings.Contains(got, "hidden character, U+202E") {
		t.Fatalf("an organization name with a right-to-left override: %q, want the refusal naming U+202E", got)
	}
	plain := strings.Replace(org, "\u202e", "", 1)
	do("name an organization", chromedp.Navigate(base+"/console/orgs"), chromedp.WaitVisible(chromedp.CSS("#org-form")),
		chromedp.SetValue(chromedp.CSS("#org-name"), plain), chromedp.Submit(chromedp.CSS("#org-form")), chromedp.WaitVisible(chromedp.CSS("#members")))
	records := actors.Orgs{Store: n.Store(), Clock: clock.System{}}
	ids, err := records.List(bg)
	if err != nil {
		t.Fatal(err)
	}
	renamed := false
	for _, id := range ids {
		if st, _, err := records.Load(bg, id); err != nil || st.Name != plain {
			continue
		}
		if _, err := records.Update(bg, id, func(st *actors.OrgState) error { st.Name = org; return nil }); err != nil {
			t.Fatal(err)
		}
		renamed = true
	}
	if !renamed {
		t.Fatal("the new organization is not in the store")
	}
	visit("/console/members", "#members")
	clean("the new organization's members")
	if got := leftToRight(".who span", "(owner)"); got != "true" {
		t.Fatalf("the role after the organization's name in the header is not drawn left to right (%s): the name's right-to-left override leaked", got)
	}
	visit("/console/mark", "#mark-form")
	if got := eval(`(() => { try { return JSON.parse(document.getElementById("mark-data").value).owner; } catch (e) { return "not JSON: " + e.message; } })()`); got != org {
		t.Fatalf("the mark form's data names the organization %q, want %q", got, org)
	}
	visit("/console/orgs", "#orgs")

	// Trusted Types: a string cannot become HTML on a console page, whatever script tries.
	if got := eval(`(() => { try { document.body.insertAdjacentHTML("beforeend", "<b data-xss=1>x</b>"); return "inserted"; } catch (e) { return e.name; } })()`); got != "TypeError" {
		t.Fatalf("inserting a string as HTML on a console page: %s, want TypeError", got)
	}
	// An API answer opened as a document is sandboxed: an origin of its own, no script.
	do("open an API answer", chromedp.Navigate(base+"/console/api/assets/"+assetID), chromedp.WaitReady(chromedp.CSS("body")))
	if got := eval(`self.origin`); got != "null" {
		t.Fatalf("an API answer shown as a document has the origin %q, want null (sandboxed)", got)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// apiDo sends one API request with key and returns the answer's headers, body and status.
func apiDo(t *testing.T, method, url, key, ctype string, body []byte) (http.Header, string, int) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", key)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.Header, string(b), resp.StatusCode
}
