package main

// `filigrane assets list|get|download|delete` (the asset library, spec 4.7) and `filigrane uploads
// create|get` (signed uploads, spec 4.3), against a running server.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"

	"filigrane/actors"
	"filigrane/actors/mediakind"
)

const assetsUsage = `usage: filigrane assets list [--limit N] [--cursor C] [--kind source|watermarked] [--media-type image|document|video] [--watermark-id HEX] [--all]
       filigrane assets get ASSET_ID
       filigrane assets download ASSET_ID [-o OUT]
       filigrane assets delete ASSET_ID [ASSET_ID...]

list prints the organization's assets, newest first, one page (--all: every page); get prints one asset;
download saves its file (-o, default the asset's file name here); delete deletes one asset, or up to 50 at
once, all or none (an owner's or admin's key). Exit codes: docs/cli.md.

flags:
`

// assetView is the part of the asset resource the client prints.
type assetView struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Version     int64   `json:"version"`
	Kind        string  `json:"kind"`
	MediaType   string  `json:"media_type"`
	SizeBytes   int64   `json:"size_bytes"`
	WatermarkID *string `json:"watermark_id"`
	CreatedAt   string  `json:"created_at"`
	Available   bool    `json:"file_available"`
}

type assetPage struct {
	Items      []assetView `json:"items"`
	NextCursor *string     `json:"next_cursor"`
}

func runAssets(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := &clientOpts{stdout: stdout, stderr: stderr}
	return clientExit("assets", o, assetsCmd(ctx, args, o))
}

func assetsCmd(ctx context.Context, args []string, o *clientOpts) error {
	subs := map[string]bool{"list": true, "get": true, "download": true, "delete": true}
	if len(args) == 0 || !subs[args[0]] {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(o.stdout, assetsUsage)
			return nil
		}
		fmt.Fprint(o.stderr, assetsUsage)
		return usageErr("want: assets list|get ASSET_ID|download ASSET_ID|delete ASSET_ID...")
	}
	sub := args[0]
	fs := flag.NewFlagSet("filigrane assets "+sub, flag.ContinueOnError)
	fs.SetOutput(o.stderr)
	fs.Usage = func() { fmt.Fprint(o.stderr, assetsUsage); fs.PrintDefaults() }
	limit := fs.Int("limit", 0, "list: assets per page, 1 to 100 (default: the server's, 25)")
	cursor := fs.String("cursor", "", "list: next_cursor of the previous page")
	kind := fs.String("kind", "", "list: source or watermarked")
	mediaType := fs.String("media-type", "", "list: image, document or video")
	wm := fs.String("watermark-id", "", "list: only the assets of this watermark id (64 hex)")
	all := fs.Bool("all", false, "list: follow next_cursor to the last page")
	out := fs.String("o", "", "download: output file (default: the asset's file name in the current directory)")
	pos, err := parseClientFlags(fs, o, args[1:])
	if err != nil {
		return err
	}
	ctx, cancel := o.deadline(ctx)
	defer cancel()
	switch sub {
	case "list":
		if len(pos) != 0 {
			return usageErr("assets list takes no argument")
		}
		q := url.Values{}
		if *limit != 0 {
			q.Set("limit", strconv.Itoa(*limit))
		}
		for k, v := range map[string]string{"kind": *kind, "media_type": *mediaType, "watermark_id": *wm} {
			if v != "" {
				q.Set(k, v)
			}
		}
		return o.listAssets(ctx, q, *cursor, *all)
	case "delete":
		if len(pos) == 0 || len(pos) > 50 {
			return usageErr("want 1 to 50 ASSET_IDs, got %d", len(pos))
		}
		for _, id := range pos {
			if !actors.ValidAssetID(id) {
				return usageErr("%q is not an asset id (ast_ and 64 hex digits)", id)
			}
		}
		if len(pos) == 1 {
			_, _, err = o.sendJSON(ctx, http.MethodDelete, "/assets/"+pos[0], "", nil, nil)
		} else {
			_, _, err = o.sendJSON(ctx, http.MethodPost, "/assets/bulk-delete", "", map[string]any{"asset_ids": pos}, nil)
		}
		if err != nil {
			return err
		}
		if !o.jsonOut {
			fmt.Fprintf(o.stdout, "deleted %d asset(s)\n", len(pos))
		}
		return nil
	}
	id, err := oneArg(pos, "ASSET_ID")
	if err != nil {
		return err
	}
	if !actors.ValidAssetID(id) {
		return usageErr("%q is not an asset id (ast_ and 64 hex digits)", id)
	}
	if sub == "get" {
		var a assetView
		body, _, err := o.getJSON(ctx, "/assets/"+id, &a)
		if err != nil {
			return err
		}
		if o.jsonOut {
			printRaw(o.stdout, body)
		} else {
			printAsset(o.stdout, a)
		}
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.url+"/assets/"+id+"/content", nil)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	resp, err := o.do(req, true)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if *out == "" {
		*out = id
		if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
			// The server's name is already safe ([A-Za-z0-9._-]); Base keeps it in the current directory.
			if name := filepath.Base(params["filename"]); name != "." && name != "/" && name != "" {
				*out = name
			}
		}
	}
	n, err := saveMedia(resp, *out)
	if err != nil {
		return err
	}
	if o.jsonOut {
		printJSON(o.stdout, map[string]any{"asset_id": id, "output": *out, "bytes": n})
	} else {
		fmt.Fprintf(o.stdout, "output %s (%d bytes)\n", *out, n)
	}
	return nil
}

// listAssets prints one page of assets, or every page from cursor on with all.
func (o *clientOpts) listAssets(ctx context.Context, q url.Values, cursor string, all bool) error {
	var items []assetView
	var raw []byte
	for {
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page assetPage
		body, _, err := o.getJSON(ctx, "/assets?"+q.Encode(), &page)
		if err != nil {
			return err
		}
		raw = body
		items = append(items, page.Items...)
		if !all || page.NextCursor == nil {
			if o.jsonOut {
				if all {
					printJSON(o.stdout, map[string]any{"items": items, "next_cursor": nil})
				} else {
					printRaw(o.stdout, raw)
				}
				return nil
			}
			for _, a := range items {
				printAsset(o.stdout, a)
			}
			if page.NextCursor != nil {
				fmt.Fprintf(o.stdout, "next page: --cursor %s\n", *page.NextCursor)
			}
			return nil
		}
		cursor = *page.NextCursor
	}
}

func printAsset(w io.Writer, a assetView) {
	wm := "-"
	if a.WatermarkID != nil {
		wm = *a.WatermarkID
	}
	file := "file"
	if !a.Available {
		file = "no file"
	}
	fmt.Fprintf(w, "%s  %-11s %-8s %9d  v%d  %s  %s  %s  %q\n", a.ID, a.Kind, a.MediaType, a.SizeBytes, a.Version, a.CreatedAt, file, wm, a.Name)
}

const uploadsUsage = `usage: filigrane uploads create FILE [--kind image|document|video|detect]
       filigrane uploads get UPLOAD_ID

create declares a signed upload and sends FILE to its URL with a progress bar (the key never goes to the
upload host), then prints the upload id to name in embed/detect requests; get prints an upload's state.
Exit codes: docs/cli.md.

flags:
`

// uploadView is the part of the upload resource the client prints.
type uploadView struct {
	UploadID  string `json:"upload_id"`
	Kind      string `json:"kind"`
	Filename  string `json:"filename"`
	Size      int64  `json:"size"`
	Status    string `json:"status"`
	ExpiresAt string `json:"expires_at"`
}

func runUploads(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := &clientOpts{stdout: stdout, stderr: stderr}
	return clientExit("uploads", o, uploadsCmd(ctx, args, o))
}

func uploadsCmd(ctx context.Context, args []string, o *clientOpts) error {
	if len(args) == 0 || (args[0] != "create" && args[0] != "get") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(o.stdout, uploadsUsage)
			return nil
		}
		fmt.Fprint(o.stderr, uploadsUsage)
		return usageErr("want: uploads create FILE, or uploads get UPLOAD_ID")
	}
	sub := args[0]
	fs := flag.NewFlagSet("filigrane uploads "+sub, flag.ContinueOnError)
	fs.SetOutput(o.stderr)
	fs.Usage = func() { fmt.Fprint(o.stderr, uploadsUsage); fs.PrintDefaults() }
	kindFlag := fs.String("kind", "", "create: image, document, video, or detect for a file to detect (default: the media kind of the file's extension)")
	pos, err := parseClientFlags(fs, o, args[1:])
	if err != nil {
		return err
	}
	arg, err := oneArg(pos, map[string]string{"create": "FILE", "get": "UPLOAD_ID"}[sub])
	if err != nil {
		return err
	}
	ctx, cancel := o.deadline(ctx)
	defer cancel()
	id := arg
	if sub == "create" {
		kind := *kindFlag
		if kind != "detect" {
			k, err := kindOf(kind, arg)
			if err != nil {
				return err
			}
			kind = string(k.Media)
		} else if _, ok := mediakind.ByFilename(arg); !ok {
			return usageErr("cannot tell the media kind of %q from its extension; a detect upload needs one", arg)
		}
		st, err := statFile(arg)
		if err != nil {
			return err
		}
		if id, err = o.signedUpload(ctx, kind, arg, st); err != nil {
			return err
		}
	}
	var u uploadView
	body, _, err := o.getJSON(ctx, "/uploads/"+url.PathEscape(id), &u)
	if err != nil {
		return err
	}
	if o.jsonOut {
		printRaw(o.stdout, body)
		return nil
	}
	fmt.Fprintf(o.stdout, "upload_id %s\nkind      %s\nfilename  %s\nsize      %d\nstatus    %s\nexpires   %s\n",
		u.UploadID, u.Kind, u.Filename, u.Size, u.Status, u.ExpiresAt)
	return nil
}
