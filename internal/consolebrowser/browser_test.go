package consolebrowser_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/internal/admin"
	"filigrane/internal/clock"
	"filigrane/internal/node"
)

// chromium finds the headless browser: FILIGRANE_CHROMIUM, else the Debian package's binary (installed by
// scripts/setup.sh --s3, which `make test` runs).
// startNode starts a single node named name on free local ports with a fresh data directory, closed when the
// test ends.
func startNode(t *testing.T, name string) *node.Node {
	t.Helper()
	n, err := node.Start(context.Background(), node.Config{DataDir: t.TempDir(), APIAddr: "127.0.0.1:0", UploadAddr: "127.0.0.1:0",
		NodeName: name, Logger: zerolog.Nop(), Clock: clock.System{}, Bootstrap: true, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = n.Close(ctx)
	})
	return n
}

// chromium is the browser the tests drive (FILIGRANE_CHROMIUM, else the first installed of the usual names); the
// test is skipped, saying why, where none is installed.
func chromium(t *testing.T) string {
	if p := os.Getenv("FILIGRANE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("Chromium is not installed (Debian package chromium; scripts/setup.sh --s3 installs it): the browser test cannot run")
	return ""
}

// screenshotDir is where the screenshots of every page go: FILIGRANE_CONSOLE_SCREENSHOTS, for someone who will
// look at them (docs/console.md's pictures). Without it the walk takes none ("" is returned): sixteen full-page
// PNG captures nobody reads were about a quarter of the test's CPU time. A failing walk still captures the page
// it failed on (failurePage).
func screenshotDir(t *testing.T) string {
	d := os.Getenv("FILIGRANE_CONSOLE_SCREENSHOTS")
	if d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// failurePage tells what a failed walk was looking at: the page's address and visible text in the log, and its
// screenshot, failure.png, in the screenshot directory if there is one, else in the test's artifact directory
// (kept by go test -artifacts). ctx is the browser's, still open.
func failurePage(t *testing.T, ctx context.Context, shots string) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Logf("failed page: no address: %v", err)
		return
	}
	body, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if err != nil {
		body = fmt.Sprintf("(no text: %v)", err)
	}
	t.Logf("failed on page %s; its text:\n%s", loc, body)
	if shots == "" {
		shots = t.ArtifactDir()
	}
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("failed page: no screenshot: %v", err)
		return
	}
	path := filepath.Join(shots, "failure.png")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Logf("failed page: %v", err)
		return
	}
	t.Logf("failed page's screenshot: %s", path)
}

// texturedPNG writes a 512x512 texturedImage to path.
func texturedPNG(t *testing.T, path string) {
	if err := os.WriteFile(path, texturedImage(t, 512), 0o644); err != nil {
		t.Fatal(err)
	}
}

// texturedImage draws a side x side PNG with smooth texture and edges: enough structure to carry a mark.
func texturedImage(t *testing.T, side int) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, side, side))
	for y := 0; y < side; y++ {
		for x := 0; x < side; x++ {
			fx, fy := float64(x), float64(y)
			v := 128 + 50*math.Sin(fx/17)*math.Cos(fy/23) + 30*math.Sin((fx+fy)/41) + float64((x*7919+y*104729)%23) - 11
			if (x/64+y/64)%2 == 0 {
				v += 25
			}
			c := uint8(max(0, min(255, v)))
			img.SetNRGBA(x, y, color.NRGBA{R: c, G: uint8(max(0, min(255, v*0.8+30))), B: uint8(255 - int(c)/2), A: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestConsoleInBrowser drives the console in headless Chromium, as a person would: sign in, create a key,
// mark an image, find it in the assets, check it by drag and drop, have a forged form and call refused
// (CSRF), and lock an account with wrong passwords. One browser session for the whole walk; a screenshot
// of each page where FILIGRANE_CONSOLE_SCREENSHOTS asks for them (screenshotDir), of the failed one otherwise.
func TestConsoleInBrowser(t *testing.T) {
	exe := chromium(t)
	n := startNode(t, "console")
	base := "http://" + n.APIAddr()
	dev := n.DevOrg
	// A second person, a member, whose account the lockout check locks.
	adm := admin.Admin{Store: n.Store(), Clock: clock.System{}, Catalog: actors.DefaultCatalog()}
	memberID, err := adm.AddMember(context.Background(), dev.OrgID, "Mallory", actors.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := adm.CreateUser(context.Background(), dev.OrgID, memberID, "member@example.com", "member password 1"); err != nil {
		t.Fatal(err)
	}

	shots := screenshotDir(t)
	imgPath := filepath.Join(t.TempDir(), "photo.png")
	texturedPNG(t, imgPath)

	// Chromium in its usual processes: --single-process (one process, 0.6-2 CPU-s less of a walk of 9-11) is a
	// mode Chromium does not support, and a clean-clone run on 2026-11-28 (Chromium 156) lost the browser to a
	// segmentation fault at the first page; not reproduced in 40 runs since, so the mode is the likely cause.
	// The browser's own output is kept and shown when the test fails.
	browserOut := &tailBuffer{max: 8 << 10}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(browserOut))...)
	defer cancelA()
	defer func() {
		if t.Failed() {
			t.Logf("the browser's output (its last %d bytes):\n%s", browserOut.max, browserOut.String())
		}
	}()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 180*time.Second) // generous: a loaded 2-core machine takes 75 s
	defer cancelT()
	// Deferred after the contexts' cancels, so it runs before them: the browser is still open.
	defer func() {
		if t.Failed() {
			failurePage(t, ctx, shots)
		}
	}()

	began := time.Now()
	do := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		t.Logf("%6.1fs %s", time.Since(began).Seconds(), step)
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	shot := func(name string) {
		t.Helper()
		if shots == "" {
			return
		}
		b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), b, 0o644); err != nil {
			t.Fatal(err)
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

	// waitText waits (in the page, on its DOM changes) until sel's text contains want.
	waitText := func(sel, want string) {
		t.Helper()
		js := fmt.Sprintf(`((document.querySelector(%q) || {}).textContent || "").includes(%q)`, sel, want)
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if err := chromedp.Do(wctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingMutation())); err != nil {
			t.Fatalf("%s never showed %q: %v", sel, want, err)
		}
	}
	// navigateBy runs actions that send a form or follow a link, waits until the page they lead to has loaded
	// (the navigation's own load, which chromedp.RunResponse follows from its start) and fails unless that
	// page answered status. Waiting for an element instead can match the page the form was sent from, and
	// whatever runs next (a screenshot) then meets the navigation half-way.
	navigateBy := func(step string, status int64, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		resp, err := chromedp.RunResponse(nctx, actions...)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if resp == nil || resp.Status != status {
			t.Fatalf("%s: the new page answered %+v, want HTTP %d", step, resp, status)
		}
		t.Logf("%6.1fs %s", time.Since(began).Seconds(), step)
	}
	// Sign in: the console sends a signed-out visitor to the sign-in page.
	do("open the console", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.CSS("#signin-form")))
	shot("01-sign-in")
	do("fill in the sign-in form",
		chromedp.SendKeys(chromedp.CSS("#email"), dev.ConsoleEmail),
		chromedp.SendKeys(chromedp.CSS("#password"), dev.ConsolePassword))
	navigateBy("sign in", 200, chromedp.Submit(chromedp.CSS("#signin-form")))
	do("the usage page", chromedp.WaitVisible(chromedp.CSS("#available")))
	if got := text("#available"); got != "1000000" {
		t.Fatalf("available credits on the usage page: %q", got)
	}
	shot("02-usage")
	// Keyboard: the first Tab reaches the "skip to content" link, and Enter on it moves focus to the page's
	// content, past the navigation.
	do("Tab to the skip link", chromedp.KeyEvent(kb.Tab))
	if got := eval(`document.activeElement.className + " " + document.activeElement.textContent`); got != "skip Skip to content" {
		t.Fatalf("first Tab focuses %q, want the skip link", got)
	}
	do("Enter on the skip link", chromedp.KeyEvent(kb.Enter))
	if got := eval(`document.activeElement.id`); got != "main" {
		t.Fatalf("after Enter on the skip link the focus is on %q, want main", got)
	}

	// Create a key; its secret is shown once and works against the API.
	do("fill in the key form",
		chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible(chromedp.CSS("#key-form")),
		chromedp.SendKeys(chromedp.CSS("#key-name"), "browser test"))
	navigateBy("create a key", 201, chromedp.Submit(chromedp.CSS("#key-form")))
	do("the created key", chromedp.WaitVisible(chromedp.CSS("#new-secret")))
	secret, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS("#new-secret")))
	if err != nil || !strings.HasPrefix(secret, "fgk_") {
		t.Fatalf("new key secret %q: %v", secret, err)
	}
	shot("03-key-created")
	if st, body := apiGet(t, base+"/auth/api-key", secret, ""); st != 200 || !strings.Contains(body, `"watermarks:embed"`) || strings.Contains(body, `"assets:delete"`) {
		t.Fatalf("the console's key on the API: %d %s", st, body)
	}
	do("reload keys", chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible(chromedp.CSS("#keys")))
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#new-secret').length`)); n != 0 {
		t.Fatal("the secret is shown again after a reload")
	}
	keysBefore := strings.Count(text("#keys tbody"), "active")

	// Sessions and keys do not mix (spec 5.1): the session cookie opens no API route, a key no console route.
	cookie := sessionCookie(t, ctx)
	if st, body := apiGet(t, base+"/assets", "", cookie); st != 401 || !strings.Contains(body, "never a console session") {
		t.Fatalf("API route with a session cookie: %d %s", st, body)
	}
	if st, body := apiGet(t, base+"/console/api/assets", secret, ""); st != 401 || !strings.Contains(body, `"session_required"`) {
		t.Fatalf("console route with an API key: %d %s", st, body)
	}

	// Mark an image through the console.
	do("mark an image",
		chromedp.Navigate(base+"/console/mark"), chromedp.WaitVisible(chromedp.CSS("#mark-form")),
		chromedp.SetUploadFiles(chromedp.CSS("#mark-file"), []string{imgPath}),
		chromedp.Click(chromedp.CSS("#mark-submit")),
		chromedp.WaitVisible(chromedp.CSS("#mark-done")))
	wmID := text(`#mark-done [data-field="X-Watermark-ID"]`)
	assetID := text(`#mark-done [data-field="X-Asset-ID"]`)
	if len(wmID) != 64 || !strings.HasPrefix(assetID, "ast_") {
		t.Fatalf("mark result: watermark %q asset %q", wmID, assetID)
	}
	shot("04-marked")
	navigateBy("follow the mark's job link", 200, chromedp.Click(chromedp.CSS("#mark-job")))
	do("the mark's job", chromedp.WaitVisible(chromedp.CSS("#job-done")))
	if job := text("#job-done"); !strings.Contains(job, "succeeded") || !strings.Contains(job, assetID) {
		t.Fatalf("job page: %q", job)
	}
	shot("04-job")
	// The jobs page lists it among the recent jobs with its status and a link to its result.
	markReq := eval(`new URLSearchParams(location.search).get("request_id")`)
	do("recent jobs", chromedp.Navigate(base+"/console/jobs"),
		chromedp.WaitVisible(chromedp.CSS(`#recent-jobs tr[data-request-id="`+markReq+`"]`)))
	waitText(`#recent-jobs tr[data-request-id="`+markReq+`"] .job-status`, "succeeded")
	if got := eval(`document.querySelector('#recent-jobs tr[data-request-id="` + markReq + `"] .job-result a').getAttribute('href')`); got != "/console/api/watermarks/jobs/"+markReq+"/result" {
		t.Fatalf("result link of the recent job: %q", got)
	}
	shot("17-jobs")

	// Find it in the assets, by the watermark id filter too.
	do("list assets", chromedp.Navigate(base+"/console/assets"),
		chromedp.WaitVisible(chromedp.CSS(`#assets tbody tr[data-asset-id="`+assetID+`"]`)))
	if rows, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#assets tbody tr').length`)); rows != 2 {
		t.Fatalf("asset rows: %d, want the source and the watermarked image", rows)
	}
	// Each image row shows a server-made thumbnail (160 px), not the full 512 px file.
	thumbs := `[...document.querySelectorAll('#assets img.thumb')]`
	wctx, cancelThumbs := context.WithTimeout(ctx, 15*time.Second)
	if err := chromedp.Do(wctx, chromedp.Poll[chromedp.Void](thumbs+`.length === 2 && `+thumbs+`.every(i => i.complete && i.naturalWidth > 0)`)); err != nil {
		t.Fatalf("thumbnails did not load: %v", err)
	}
	cancelThumbs()
	if got := eval(thumbs + `.map(i => i.naturalWidth + "x" + i.naturalHeight + " " + i.getAttribute("src").split("/").slice(0, 3).join("/")).join(", ")`); got != "160x160 /console/thumbnails, 160x160 /console/thumbnails" {
		t.Fatalf("thumbnails: %q", got)
	}
	do("set the filters", chromedp.SetValue(chromedp.CSS("#f-kind"), "watermarked"), chromedp.SetValue(chromedp.CSS("#f-wm"), wmID))
	navigateBy("filter by kind and watermark id", 200, chromedp.Submit(chromedp.CSS("#asset-filters")))
	do("the filtered list", chromedp.WaitVisible(chromedp.CSS(`#assets[data-loaded] tbody tr[data-asset-id="`+assetID+`"]`)))
	if loc, _ := chromedp.Run(ctx, chromedp.Location()); !strings.Contains(loc, "kind=watermarked") {
		t.Fatalf("the filtered list's address: %s", loc)
	}
	if rows, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#assets tbody tr').length`)); rows != 1 {
		t.Fatalf("watermarked asset rows: %d", rows)
	}
	// Rename it and set its metadata from the list.
	do("edit the asset", chromedp.Click(chromedp.CSS(`#assets tr[data-asset-id="`+assetID+`"] button[aria-expanded]`)),
		chromedp.WaitVisible(chromedp.CSS("#name-"+assetID)),
		chromedp.SetValue(chromedp.CSS("#name-"+assetID), "cover photo"),
		chromedp.SetValue(chromedp.CSS("#meta-"+assetID), `{"campaign": "spring"}`),
		chromedp.Click(chromedp.CSS(`#edit-`+assetID+` button[type="submit"]`)))
	waitText("#edit-"+assetID+" [role=status]", "Saved.")
	if st, body := apiGet(t, base+"/assets/"+assetID, secret, ""); st != 200 || !strings.Contains(body, `"name":"cover photo"`) || !strings.Contains(body, `"campaign":"spring"`) {
		t.Fatalf("the edited asset: %d %s", st, body)
	}
	shot("05-assets")

	// Check the watermarked file by dragging it onto the drop zone.
	marked := filepath.Join(t.TempDir(), "photo-watermarked.png")
	st, body := apiGet(t, base+"/assets/"+assetID+"/content", secret, "")
	if st != 200 {
		t.Fatalf("download the marked file: %d", st)
	}
	if err := os.WriteFile(marked, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	do("open the check page", chromedp.Navigate(base+"/console/check"), chromedp.WaitVisible(chromedp.CSS("#drop")))
	// Keyboard: Enter on the focused drop zone opens the file chooser (intercepted here, so none shows).
	wctx, cancelW := context.WithTimeout(ctx, 15*time.Second)
	opened := chromedp.Events(wctx, page.FileChooserOpened)
	if _, err := chromedp.Call(ctx, page.SetInterceptFileChooserDialog, page.SetInterceptFileChooserDialogParams{Enabled: true}); err != nil {
		t.Fatal(err)
	}
	do("Enter on the drop zone", chromedp.SendKeys(chromedp.CSS("#drop"), kb.Enter))
	for ev, err := range opened {
		if err != nil {
			t.Fatalf("no file chooser after Enter on the drop zone: %v", err)
		}
		if ev.Mode != page.FileChooserOpenedModeSelectSingle {
			t.Fatalf("file chooser mode %s", ev.Mode)
		}
		break
	}
	cancelW()
	if _, err := chromedp.Call(ctx, page.SetInterceptFileChooserDialog, page.SetInterceptFileChooserDialogParams{Enabled: false}); err != nil {
		t.Fatal(err)
	}
	var at []float64
	if err := json.Unmarshal([]byte(eval(`(async () => { const r = document.getElementById('drop').getBoundingClientRect();
		return JSON.stringify([r.x + r.width / 2, r.y + r.height / 2]) })()`)), &at); err != nil || len(at) != 2 {
		t.Fatalf("drop zone position: %v", err)
	}
	data := &input.DragData{Items: []*input.DragDataItem{}, Files: []string{marked}, DragOperationsMask: 1}
	for _, typ := range []input.DispatchDragEventType{input.DispatchDragEventTypeDragEnter, input.DispatchDragEventTypeDragOver, input.DispatchDragEventTypeDrop} {
		if _, err := chromedp.Call(ctx, input.DispatchDragEvent, input.DispatchDragEventParams{Type: typ, X: at[0], Y: at[1], Data: data}); err != nil {
			t.Fatalf("drag %s: %v", typ, err)
		}
	}
	do("detection result", chromedp.WaitVisible(chromedp.CSS("#check-done")))
	if v, got := text("#verdict"), text("#check-wm"); v != "Watermarked" || got != wmID {
		t.Fatalf("drop check: %q %q, want Watermarked %s", v, got, wmID)
	}
	if rows, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#units tbody tr').length`)); rows != 1 {
		t.Fatalf("unit rows: %d", rows)
	}
	shot("06-check")

	// The pages over the other API routes load and say what there is; the cluster page shows this node. The
	// storage, members and GPU pages are checked the same way where the walk opens them to change something.
	open := func(path, sel, want, name string) {
		t.Helper()
		do("open "+path, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.CSS("#main")))
		waitText(sel, want)
		shot(name)
	}
	open("/console/batches", "#batches-status", "No batches yet.", "10-batches")
	open("/console/webhooks", "#webhooks-status", "No endpoints yet.", "11-webhooks")
	open("/console/cluster", "#cluster tbody", "this node", "14-cluster")
	// Storage: add a destination from the console; its verification is tried (and refused here: the
	// endpoint is a private address, which the node does not write to) and its deliveries listed.
	open("/console/storage", "#storage-status", "No destinations yet.", "12-storage")
	do("add a storage destination", chromedp.WaitVisible(chromedp.CSS("#storage-new")),
		chromedp.Click(chromedp.CSS("#storage-new summary")),
		chromedp.SendKeys(chromedp.CSS("#st-name"), "results"),
		chromedp.SendKeys(chromedp.CSS("#st-endpoint"), "127.0.0.1:9"),
		chromedp.SendKeys(chromedp.CSS("#st-bucket"), "acme-results"),
		chromedp.SendKeys(chromedp.CSS("#st-akid"), "AKIAEXAMPLE"),
		chromedp.SendKeys(chromedp.CSS("#st-secret"), "not a real secret"),
		chromedp.Click(chromedp.CSS(`#storage-form button[type="submit"]`)))
	waitText("#storage-status", "Added results.")
	waitText("#storage tbody", "not verified")
	do("verify it", chromedp.Click(chromedp.CSS(`#storage button[aria-label="Verify results"]`)))
	waitText("#storage-status", "storage_verification_failed")
	do("its deliveries", chromedp.Click(chromedp.CSS(`#storage button[aria-label="Deliveries to results"]`)))
	waitText("#storage-deliveries", "No deliveries yet.")
	shot("12-storage-added")

	// Members: the owner makes Mallory an admin; the role shows at once.
	open("/console/members", "#members tbody", "Mallory", "15-members")
	do("choose admin for Mallory", chromedp.WaitVisible(chromedp.CSS("#role-"+memberID)),
		chromedp.SetValue(chromedp.CSS("#role-"+memberID), "admin"))
	navigateBy("make Mallory admin", 200, chromedp.Click(chromedp.CSS(`tr[data-member-id="`+memberID+`"] form[action$="/role"] button`)))
	do("the members page after the change", chromedp.WaitVisible(chromedp.CSS("#role-"+memberID)))
	if got := eval(`document.getElementById("role-` + memberID + `").value`); got != "admin" {
		t.Fatalf("Mallory's role after the change: %q", got)
	}
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#role-`+dev.MemberID+`, form[action="/console/members/`+dev.MemberID+`/remove"]').length`)); n != 0 {
		t.Fatal("the only owner is offered to change their role or leave")
	}
	shot("15-members")
	// On a phone the members table scrolls inside its box; the page does not scroll sideways.
	do("members on a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)), chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS("#members")))
	if w, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 390 {
		t.Fatalf("the members page scrolls sideways on a phone: %d px wide", w)
	}
	shot("19-members-phone")
	do("laptop viewport again", chromedp.EmulateViewport(1280, 900))

	// Organizations: create one (its owner, no credits), see it in the header, switch back.
	do("name an organization", chromedp.Navigate(base+"/console/orgs"), chromedp.WaitVisible(chromedp.CSS("#org-form")),
		chromedp.SendKeys(chromedp.CSS("#org-name"), "Studio Two"))
	navigateBy("create an organization", 200, chromedp.Submit(chromedp.CSS("#org-form")))
	do("the new organization's members", chromedp.WaitVisible(chromedp.CSS("#members")))
	if got := text("#current-org"); got != "Studio Two" {
		t.Fatalf("organization after creating one: %q", got)
	}
	do("organizations", chromedp.Navigate(base+"/console/orgs"), chromedp.WaitVisible(chromedp.CSS("#orgs")))
	shot("18-orgs")
	navigateBy("switch back", 200, chromedp.Click(chromedp.CSS(`#orgs button[aria-label="Switch to Development"]`)))
	do("the usage page", chromedp.WaitVisible(chromedp.CSS("#available")))
	if got := text("#current-org"); got != "Development" {
		t.Fatalf("organization after switching back: %q", got)
	}

	open("/console/gpu", "#gpu-status", "unavailable", "13-gpu")
	do("wake the GPU", chromedp.WaitVisible(chromedp.CSS("#gpu-wake")),
		chromedp.Click(chromedp.CSS("#gpu-wake")))
	waitText("#gpu-message", "Wake requested.")

	// Usage after the work above: two credits charged today (mark and check), drawn in the chart.
	do("usage after work", chromedp.Navigate(base+"/console/usage"), chromedp.WaitVisible(chromedp.CSS("#available")))
	if got := text("#available"); got != "999998" {
		t.Fatalf("available credits after a mark and a check: %q", got)
	}
	if tall, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.querySelectorAll('.chart rect')].filter(r => r.getAttribute('height') !== '0.00').length`)); tall != 1 {
		t.Fatalf("chart bars with use: %d, want today's", tall)
	}
	shot("16-usage-after-work")

	// Phone layout: the same page in a narrow viewport.
	do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)), chromedp.Navigate(base+"/console/usage"),
		chromedp.WaitVisible(chromedp.CSS("#available")))
	if w, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 390 {
		t.Fatalf("the usage page scrolls sideways on a phone: %d px wide", w)
	}
	shot("07-usage-phone")
	do("laptop viewport", chromedp.EmulateViewport(1280, 900))

	// CSRF: a form whose token was tampered with is refused and changes nothing; so is a script call.
	do("forge the key form",
		chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible(chromedp.CSS("#key-form")),
		chromedp.SetValue(chromedp.CSS(`#key-form input[name="csrf"]`), "forged"),
		chromedp.SendKeys(chromedp.CSS("#key-name"), "forged"))
	navigateBy("send the forged key form", 403, chromedp.Submit(chromedp.CSS("#key-form")))
	do("the refusal", chromedp.WaitVisible(chromedp.CSS("#page-error")))
	if e := text("#page-error"); !strings.Contains(e, "csrf_failed") {
		t.Fatalf("forged form: %q", e)
	}
	shot("08-csrf-refused")
	do("back to keys", chromedp.Navigate(base+"/console/keys"), chromedp.WaitVisible(chromedp.CSS("#keys")))
	if after := strings.Count(text("#keys tbody"), "active"); after != keysBefore {
		t.Fatalf("a forged form created a key: %d active keys, were %d", after, keysBefore)
	}
	if got := eval(`fetch('/console/api/assets/` + assetID + `', {method: 'DELETE', headers: {'X-CSRF-Token': 'forged'}})
		.then(async r => r.status + ' ' + (await r.json()).code)`); got != "403 csrf_failed" {
		t.Fatalf("forged script call: %q", got)
	}
	if st, _ := apiGet(t, base+"/assets/"+assetID, secret, ""); st != 200 {
		t.Fatalf("the asset after a forged delete: %d", st)
	}

	// Sign out: the cookie's session is gone on the server too.
	navigateBy("sign out", 200, chromedp.Click(chromedp.CSS(".who button")))
	do("the sign-in page", chromedp.WaitVisible(chromedp.CSS("#signin-form")))
	if st, _ := apiGet(t, base+"/console/api/assets", "", cookie); st != 401 {
		t.Fatalf("the old session after sign-out: %d", st)
	}

	// Lockout: five wrong passwords lock the account; the right one is refused while it is locked. Each try is
	// typed into the sign-in form on the page in front of the person: after sign-out, and then the page that
	// answered the previous try (the form again, empty, under its error), as a person tries again.
	signIn := func(email, pw string, status int64) string {
		t.Helper()
		do("fill in the sign-in form as "+email, chromedp.WaitVisible(chromedp.CSS("#signin-form")),
			chromedp.SendKeys(chromedp.CSS("#email"), email), chromedp.SendKeys(chromedp.CSS("#password"), pw))
		navigateBy("sign in as "+email, status, chromedp.Submit(chromedp.CSS("#signin-form")))
		do("the sign-in error", chromedp.WaitVisible(chromedp.CSS("#page-error")))
		return text("#page-error")
	}
	for i := 1; i <= 4; i++ {
		if e := signIn("member@example.com", fmt.Sprintf("wrong password %d", i), 401); e != "Wrong email or password." {
			t.Fatalf("wrong password %d: %q", i, e)
		}
	}
	if e := signIn("member@example.com", "wrong password 5", 429); !strings.Contains(e, "locked") {
		t.Fatalf("fifth wrong password: %q", e)
	}
	if e := signIn("member@example.com", "member password 1", 429); !strings.Contains(e, "locked") {
		t.Fatalf("right password while locked: %q", e)
	}
	shot("09-locked")
	if shots != "" {
		t.Logf("screenshots in %s", shots)
	}
}

func sessionCookie(t *testing.T, ctx context.Context) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`))
	if err == nil && strings.Contains(v, "filigrane_session") {
		t.Fatal("the session cookie is readable from scripts: it must be HttpOnly")
	}
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Cookies {
		if c.Name == "filigrane_session" {
			if !c.HTTPOnly || c.SameSite != "Lax" || c.Path != "/console" {
				t.Fatalf("session cookie attributes: %+v", c)
			}
			return c.Value
		}
	}
	t.Fatal("no session cookie")
	return ""
}

func apiGet(t *testing.T, url, key, session string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	if session != "" {
		req.AddCookie(&http.Cookie{Name: "filigrane_session", Value: session})
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// tailBuffer keeps the last max bytes written to it; the browser writes from its own goroutine.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *tailBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if over := len(w.b) - w.max; over > 0 {
		w.b = append(w.b[:0], w.b[over:]...)
	}
	return len(p), nil
}

func (w *tailBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}
