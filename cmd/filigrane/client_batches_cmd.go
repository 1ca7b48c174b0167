package main

// `filigrane batches create|get`: a folder or zip of files embedded as one batch (docs/batches.md), with a
// per-item progress display while it runs and the archive downloaded at the end.

import (
	"archive/zip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
)

const batchesUsage = `usage: filigrane batches create DIR|ZIP [--data JSON] [--archive] [--output-format F] [--wait] [-o OUT.zip] [--idempotency-key K]
       filigrane batches get BATCH_ID [--wait] [-o OUT.zip]
       filigrane batches cancel BATCH_ID

create embeds every media file of DIR (not recursive; files of no media kind are skipped) or every member of
ZIP as one batch: a folder's files go through the batch's signed uploads, a zip is sent as it is. --wait
follows the batch with a per-item progress display and, with --archive, downloads the result zip (-o).
cancel stops a batch: items not yet started are cancelled, running ones finish (docs/batches.md).
Exit codes: docs/cli.md (7 when the batch ends failed).

flags:
`

// batchView is the part of the batch resource the client follows.
type batchView struct {
	BatchID       string  `json:"batch_id"`
	Status        string  `json:"status"`
	ItemCount     int     `json:"item_count"`
	Archive       bool    `json:"archive"`
	ArchiveStatus *string `json:"archive_status"`
	ArchiveURL    string  `json:"archive_url"`
	Counts        struct {
		Pending    int `json:"pending"`
		Accepted   int `json:"accepted"`
		Rejected   int `json:"rejected"`
		Succeeded  int `json:"succeeded"`
		Failed     int `json:"failed"`
		InProgress int `json:"in_progress"`
	} `json:"counts"`
	Items []struct {
		Index     int     `json:"index"`
		Filename  string  `json:"filename"`
		Status    string  `json:"status"`
		RequestID *string `json:"request_id"`
		ErrorCode *string `json:"error_code"`
		Upload    *struct {
			Method string `json:"method"`
			URL    string `json:"url"`
		} `json:"upload"`
	} `json:"items"`
}

func (b batchView) final() bool {
	switch b.Status {
	case "completed", "failed", "cancelled", "canceled", "expired":
		return true
	}
	return false
}

// ended counts the items that reached an end state.
func (b batchView) ended() int { return b.Counts.Rejected + b.Counts.Succeeded + b.Counts.Failed }

func runBatches(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := &clientOpts{stdout: stdout, stderr: stderr}
	return clientExit("batches", o, batchesCmd(ctx, args, o))
}

func batchesCmd(ctx context.Context, args []string, o *clientOpts) error {
	sub, fs, err := subcommand(o, "batches", batchesUsage, "want: batches create DIR|ZIP, batches get BATCH_ID or batches cancel BATCH_ID", args, "create", "get", "cancel")
	if fs == nil {
		return err
	}
	data := fs.String("data", "", `embed data of every item, a JSON object (default: {"source":"<file name>"} per item)`)
	archive := fs.Bool("archive", false, "ask the server for a zip of the results (downloaded with --wait)")
	outFormat := fs.String("output-format", "", "format of the image results: png (default), jpeg or webp; documents and videos keep theirs")
	wait := fs.Bool("wait", false, "follow the batch to its end with a per-item progress display")
	out := fs.String("o", "", "with --wait and --archive, where the result zip goes (default: BATCH_ID.zip)")
	idem := fs.String("idempotency-key", "", "Idempotency-Key of the batch (default: a fresh random one, printed on stderr)")
	pos, err := parseClientFlags(fs, o, args[1:])
	if err != nil {
		return err
	}
	arg, err := oneArg(pos, "argument")
	if err != nil {
		return err
	}
	ctx, cancel := o.deadline(ctx)
	defer cancel()
	var b batchView
	var body []byte
	switch sub {
	case "get":
		body, _, err = o.getJSON(ctx, "/watermarks/batches/"+url.PathEscape(arg), &b)
		if err != nil {
			return err
		}
	case "cancel":
		body, _, err = o.sendJSON(ctx, http.MethodPost, "/watermarks/batches/"+url.PathEscape(arg)+"/cancel", "", nil, &b)
		if err != nil {
			return err
		}
		if o.jsonOut {
			printRaw(o.stdout, body)
		} else {
			fmt.Fprintf(o.stdout, "batch %s %s: %d succeeded, %d failed, %d rejected, %d in progress\n", b.BatchID, b.Status,
				b.Counts.Succeeded, b.Counts.Failed, b.Counts.Rejected, b.Counts.InProgress)
		}
		return nil
	default:
		if *data != "" {
			var obj map[string]any
			if err := json.Unmarshal([]byte(*data), &obj); err != nil || obj == nil {
				return usageErr("--data must be a JSON object")
			}
		}
		if *idem != "" && !jobstate.ValidIdempotencyKey(*idem) {
			return usageErr("--idempotency-key must be 8 to 128 letters, digits, hyphens or underscores")
		}
		if *idem == "" {
			var r [16]byte
			_, _ = rand.Read(r[:])
			*idem = "cli-" + hex.EncodeToString(r[:])
			o.info("Idempotency-Key %s (repeat with --idempotency-key to resume this batch)", *idem)
		}
		st, err := os.Stat(arg)
		if err != nil {
			return usageErr("%v", err)
		}
		if st.IsDir() {
			b, body, err = o.batchFromDir(ctx, arg, *data, batchOptions(*archive, *outFormat), *idem)
		} else {
			b, body, err = o.batchFromZip(ctx, arg, *data, batchOptions(*archive, *outFormat), *idem)
		}
		if err != nil {
			return err
		}
	}
	if !*wait {
		if o.jsonOut {
			printRaw(o.stdout, body)
		} else {
			fmt.Fprintf(o.stdout, "batch %s %s (%d items)\nfollow it: filigrane batches get %s --wait\n", b.BatchID, b.Status, b.ItemCount, b.BatchID)
		}
		return nil
	}
	return o.followBatch(ctx, b, *out)
}

// batchOptions are the create body's (or manifest's) options; output_format is sent only when asked for, so
// that the server's default applies and older servers, which refuse unknown fields, still take the batch.
func batchOptions(archive bool, outFormat string) map[string]any {
	m := map[string]any{"archive": archive}
	if outFormat != "" {
		m["output_format"] = outFormat
	}
	return m
}

// itemData is one item's data: --data, or {"source": name}.
func itemData(data, name string) json.RawMessage {
	if data != "" {
		return json.RawMessage(data)
	}
	b, _ := json.Marshal(map[string]string{"source": name})
	return b
}

// withItems is the body of a create request: the options and the items.
func withItems(opts map[string]any, items any) map[string]any {
	body := maps.Clone(opts)
	body["items"] = items
	return body
}

// batchFromDir creates a batch of the folder's media files, PUTs each to its item's signed URL and starts it.
func (o *clientOpts) batchFromDir(ctx context.Context, dir, data string, opts map[string]any, idem string) (batchView, []byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return batchView{}, nil, usageErr("read %s: %v", dir, err)
	}
	type item struct {
		Filename string          `json:"filename"`
		Size     int64           `json:"size"`
		Data     json.RawMessage `json:"data"`
	}
	var items []item
	var paths []string
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if _, ok := mediakind.ByFilename(e.Name()); !ok {
			o.info("skipping %s: no media kind has its extension", e.Name())
			continue
		}
		info, err := e.Info()
		if err != nil {
			return batchView{}, nil, usageErr("stat %s: %v", e.Name(), err)
		}
		items = append(items, item{Filename: e.Name(), Size: info.Size(), Data: itemData(data, e.Name())})
		paths = append(paths, filepath.Join(dir, e.Name()))
	}
	if len(items) == 0 {
		return batchView{}, nil, usageErr("%s holds no media file", dir)
	}
	var b batchView
	if _, _, err := o.sendJSON(ctx, http.MethodPost, "/watermarks/batches", idem, withItems(opts, items), &b); err != nil {
		return batchView{}, nil, err
	}
	var total int64
	for _, it := range items {
		total += it.Size
	}
	bar := o.newBar(total, fmt.Sprintf("uploading %d files", len(items)), true)
	for n, it := range b.Items {
		if it.Upload == nil || it.Index < 0 || it.Index >= len(paths) {
			continue // received already (a repeated create), or nothing to send
		}
		if bar != nil {
			// One bar over every byte (rate and time left for the whole batch), naming the file on its way.
			bar.Describe(fmt.Sprintf("uploading %d/%d %s", n+1, len(b.Items), items[it.Index].Filename))
		}
		if err := o.putFile(ctx, it.Upload.Method, it.Upload.URL, paths[it.Index], bar); err != nil {
			return batchView{}, nil, err
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	var started batchView
	body, _, err := o.sendJSON(ctx, http.MethodPost, "/watermarks/batches/"+url.PathEscape(b.BatchID)+"/start", "", nil, &started)
	return started, body, err
}

// newBar returns a progress bar on stderr when showBar says so (bytes, rate and time left, or a count).
func (o *clientOpts) newBar(total int64, desc string, bytesBar bool) *progressbar.ProgressBar {
	if !o.showBar() {
		return nil
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(o.stderr),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(o.stderr) }),
	}
	if bytesBar {
		opts = append(opts, progressbar.OptionShowBytes(true))
	} else {
		opts = append(opts, progressbar.OptionSetItsString("items"), progressbar.OptionShowIts())
	}
	return progressbar.NewOptions64(total, opts...)
}

// putFile sends one file to a signed URL, counting its bytes on bar.
func (o *clientOpts) putFile(ctx context.Context, method, target, file string, bar *progressbar.ProgressBar) error {
	f, err := os.Open(file)
	if err != nil {
		return usageErr("open %s: %v", file, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return usageErr("stat %s: %v", file, err)
	}
	var body io.Reader = f
	if bar != nil {
		r := progressbar.NewReader(f, bar)
		body = &r
	}
	if method == "" {
		method = http.MethodPut
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return fmt.Errorf("build upload request: %w", err)
	}
	req.ContentLength = st.Size()
	resp, err := o.do(req, false)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return nil
}

// batchFromZip sends the zip with a manifest naming its media members.
func (o *clientOpts) batchFromZip(ctx context.Context, file, data string, opts map[string]any, idem string) (batchView, []byte, error) {
	zr, err := zip.OpenReader(file)
	if err != nil {
		return batchView{}, nil, usageErr("open %s as a zip: %v", file, err)
	}
	type item struct {
		Filename string          `json:"filename"`
		Data     json.RawMessage `json:"data"`
	}
	var items []item
	for _, f := range zr.File {
		name := f.Name
		if strings.HasSuffix(name, "/") || strings.HasPrefix(name, "__MACOSX/") || strings.HasPrefix(path.Base(name), ".") {
			continue
		}
		if _, ok := mediakind.ByFilename(name); !ok {
			continue
		}
		items = append(items, item{Filename: name, Data: itemData(data, path.Base(name))})
	}
	zr.Close()
	if len(items) == 0 {
		return batchView{}, nil, usageErr("%s holds no media file", file)
	}
	manifest, err := json.Marshal(withItems(opts, items))
	if err != nil {
		return batchView{}, nil, fmt.Errorf("encode manifest: %w", err)
	}
	st, err := os.Stat(file)
	if err != nil {
		return batchView{}, nil, usageErr("%v", err)
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	bar := o.newBar(st.Size(), "uploading "+filepath.Base(file), true)
	go func() {
		err := func() error {
			if err := mw.WriteField("manifest", string(manifest)); err != nil {
				return err
			}
			f, err := os.Open(file)
			if err != nil {
				return err
			}
			defer f.Close()
			part, err := mw.CreateFormFile("archive", filepath.Base(file))
			if err != nil {
				return err
			}
			var src io.Reader = f
			if bar != nil {
				r := progressbar.NewReader(f, bar)
				src = &r
			}
			if _, err := io.Copy(part, src); err != nil {
				return err
			}
			return mw.Close()
		}()
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url+"/watermarks/batches/zip", pr)
	if err != nil {
		pr.Close()
		return batchView{}, nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	// After a chunked multipart embed the server parses what is left of the body on the connection as a next
	// request and answers it 400 (seen on main, Nov 2026); a reused connection would hand that 400 to the next
	// call, so each streamed multipart request gets its own connection.
	req.Close = true
	req.Header.Set("Idempotency-Key", idem)
	resp, err := o.do(req, true)
	pr.Close()
	if err != nil {
		return batchView{}, nil, err
	}
	defer resp.Body.Close()
	if bar != nil {
		_ = bar.Finish()
	}
	var b batchView
	body, _, err := readJSON(resp, &b)
	return b, body, err
}

// followBatch polls the batch until it ends, showing each item's state as it changes (one line per item and
// change) and ended items out of all (a bar on a terminal, a line per change otherwise), prints the per-item
// outcome and downloads the archive when one was asked for.
func (o *clientOpts) followBatch(ctx context.Context, b batchView, out string) error {
	statusPath := "/watermarks/batches/" + url.PathEscape(b.BatchID)
	bar := o.newBar(int64(max(b.ItemCount, 1)), "batch "+b.BatchID, false)
	last := -1
	seen := map[int]string{}
	body, err := o.pollUntil(ctx, "batch "+b.BatchID, statusPath, func(body []byte) (bool, error) {
		b = batchView{}
		if err := decodeAnswer(body, &b); err != nil {
			return false, err
		}
		if !o.quiet {
			for _, it := range b.Items {
				if seen[it.Index] == it.Status {
					continue
				}
				seen[it.Index] = it.Status
				if bar != nil {
					_ = bar.Clear() // the line goes above the bar, which redraws on its next update
				}
				line := fmt.Sprintf("  item %d %s: %s", it.Index, it.Filename, it.Status)
				if it.ErrorCode != nil {
					line += " (" + *it.ErrorCode + ")"
				}
				fmt.Fprintln(o.stderr, line)
			}
		}
		if n := b.ended(); n != last {
			last = n
			if bar != nil {
				_ = bar.Set(n)
			} else if !o.quiet {
				fmt.Fprintf(o.stderr, "batch %s: %s, %d/%d items ended (%d succeeded, %d failed, %d rejected)\n",
					b.BatchID, b.Status, n, b.ItemCount, b.Counts.Succeeded, b.Counts.Failed, b.Counts.Rejected)
			}
		}
		return b.final(), nil
	})
	if err != nil {
		return err
	}
	if bar != nil {
		_ = bar.Finish()
	}
	archivePath := ""
	if b.Archive && b.ArchiveStatus != nil && *b.ArchiveStatus == "ready" {
		if out == "" {
			out = b.BatchID + ".zip"
		}
		resp, err := o.getFile(ctx, b.ArchiveURL)
		if err != nil {
			return err
		}
		_, err = saveMedia(resp, out)
		resp.Body.Close()
		if err != nil {
			return err
		}
		archivePath = out
	}
	if o.jsonOut {
		printRaw(o.stdout, body)
	} else {
		fmt.Fprintf(o.stdout, "batch %s %s: %d succeeded, %d failed, %d rejected\n", b.BatchID, b.Status,
			b.Counts.Succeeded, b.Counts.Failed, b.Counts.Rejected)
		for _, it := range b.Items {
			line := fmt.Sprintf("  %3d %-30s %s", it.Index, it.Filename, it.Status)
			if it.RequestID != nil {
				line += " " + *it.RequestID
			}
			if it.ErrorCode != nil {
				line += " " + *it.ErrorCode
			}
			fmt.Fprintln(o.stdout, line)
		}
		if archivePath != "" {
			fmt.Fprintf(o.stdout, "archive %s\n", archivePath)
		}
	}
	if b.Status != "completed" {
		return &clientError{exit: exitJobFailed, msg: fmt.Sprintf("batch %s ended %s", b.BatchID, b.Status)}
	}
	return nil
}
