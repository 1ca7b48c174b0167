package main

// `filigrane assets list|get|update|download|delete` (the asset library, spec 4.7) and `filigrane uploads
// create|get` (signed uploads, spec 4.3), against a running server.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"filigrane/actors"
	"filigrane/actors/mediakind"
)

const assetsUsage = `usage: filigrane assets list [--limit N] [--cursor C] [--kind source|watermarked] [--media-type image|document|video] [--watermark-id HEX] [--all]
       filigrane assets get ASSET_ID
       filigrane assets update ASSET_ID [--name N] [--metadata JSON | --metadata-file F] [--version V]
       filigrane assets download ASSET_ID [-o OUT]
       filigrane assets delete ASSET_ID [ASSET_ID...]

list prints the organization's assets, newest first, one page (--all: every page); get prints one asset and
its metadata; update renames an asset and/or replaces its metadata (PATCH, the API's rules) and prints it:
with --version V the server refuses the edit (409 asset_version_conflict, exit 2) when the asset is no longer
at version V; without --version the client first reads the asset's current version and edits that, so an edit
made in between by someone else is overwritten. download saves its file (-o, default the asset's file name
here); delete deletes one asset, or up to 50 at once, all or none (an owner's or admin's key). Exit codes:
docs/cli.md.

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
	// Metadata is absent in lists; get and update answer it (an object, possibly empty).
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// maxMetadataFile bounds what --metadata-file reads: far above the server's 8 KB of compacted metadata, so
// that an indented file is the server's to judge, yet a wrong file (an image) is not sent whole.
const maxMetadataFile = 1 << 20

type assetPage struct {
	Items      []assetView `json:"items"`
	NextCursor *string     `json:"next_cursor"`
}

func runAssets(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := &clientOpts{stdout: stdout, stderr: stderr}
	return clientExit("assets", o, assetsCmd(ctx, args, o))
}

func assetsCmd(ctx context.Context, args []string, o *clientOpts) error {
	sub, fs, err := subcommand(o, "assets", assetsUsage, "want: assets list|get ASSET_ID|update ASSET_ID|download ASSET_ID|delete ASSET_ID...", args, "list", "get", "update", "download", "delete")
	if fs == nil {
		return err
	}
	limit := fs.Int("limit", 0, "list: assets per page, 1 to 100 (default: the server's, 25)")
	cursor := fs.String("cursor", "", "list: next_cursor of the previous page")
	kind := fs.String("kind", "", "list: source or watermarked")
	mediaType := fs.String("media-type", "", "list: image, document or video")
	wm := fs.String("watermark-id", "", "list: only the assets of this watermark id (64 hex)")
	all := fs.Bool("all", false, "list: follow next_cursor to the last page")
	out := fs.String("o", "", "download: output file (default: the asset's file name in the current directory)")
	name := fs.String("name", "", "update: the asset's new name (1 to 200 printable characters)")
	metadata := fs.String("metadata", "", "update: the new metadata, a JSON object that replaces the old one whole ('{}' clears it)")
	metadataFile := fs.String("metadata-file", "", "update: read the new metadata from this file instead of --metadata")
	version := fs.Int64("version", 0, "update: the version the edit applies to; the server refuses it when the asset changed since (default: read the current version first)")
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
	if sub == "update" {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		edit, err := assetEdit(set, *name, *metadata, *metadataFile, *version)
		if err != nil {
			return err
		}
		return o.updateAsset(ctx, id, edit)
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
			printMetadata(o.stdout, a.Metadata)
		}
		return nil
	}
	resp, err := o.getFile(ctx, "/assets/"+id+"/content")
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

// assetPatch is the body of PATCH /assets/{id}; Version 0 means "read the current one first".
type assetPatch struct {
	Version  int64           `json:"version"`
	Name     *string         `json:"name,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// assetEdit builds the edit from the update flags (set: the flags given). It checks only what the client
// must know to build the request (something to change, one metadata source, JSON that parses, a positive
// version); the name and metadata rules are the server's (422 invalid_request), so they live in one place.
func assetEdit(set map[string]bool, name, metadata, metadataFile string, version int64) (assetPatch, error) {
	var p assetPatch
	if set["version"] {
		if version < 1 {
			return p, usageErr("--version must be a positive integer, not %d", version)
		}
		p.Version = version
	}
	if set["name"] {
		p.Name = &name
	}
	if set["metadata"] && set["metadata-file"] {
		return p, usageErr("give --metadata or --metadata-file, not both")
	}
	raw, from := []byte(metadata), "--metadata"
	if set["metadata-file"] {
		b, err := readSmallFile(metadataFile, maxMetadataFile)
		if err != nil {
			return p, usageErr("--metadata-file: %v", err)
		}
		raw, from = b, metadataFile
	}
	if set["metadata"] || set["metadata-file"] {
		if !json.Valid(raw) {
			return p, usageErr("%s is not valid JSON (the metadata is a JSON object, for example '{\"customer\":\"c-42\"}')", from)
		}
		p.Metadata = bytes.TrimSpace(raw)
	}
	if p.Name == nil && p.Metadata == nil {
		return p, usageErr("assets update needs --name, --metadata or --metadata-file")
	}
	return p, nil
}

// readSmallFile reads path, refusing a file of more than limit bytes.
func readSmallFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}

// updateAsset sends the edit and prints the asset the server answers. Without a version it reads the asset's
// current one first (said on stderr), which makes the edit apply over whatever the asset holds now.
func (o *clientOpts) updateAsset(ctx context.Context, id string, edit assetPatch) error {
	if edit.Version == 0 {
		var cur assetView
		if _, _, err := o.getJSON(ctx, "/assets/"+id+"?include_metadata=false", &cur); err != nil {
			return err
		}
		if cur.Version < 1 {
			return &clientError{exit: exitServer, msg: fmt.Sprintf("the server's asset %s has no version", id)}
		}
		edit.Version = cur.Version
		o.info("editing version %d of %s, its current one (--version makes the server refuse an asset that changed since you read it)", cur.Version, id)
	}
	var a assetView
	body, _, err := o.sendJSON(ctx, http.MethodPatch, "/assets/"+id, "", edit, &a)
	var ce *clientError
	if errors.As(err, &ce) && strings.HasPrefix(ce.msg, "asset_version_conflict:") {
		ce.msg += fmt.Sprintf("; `filigrane assets get %s` shows its current version", id)
	}
	if err != nil {
		return err
	}
	if o.jsonOut {
		printRaw(o.stdout, body)
		return nil
	}
	printAsset(o.stdout, a)
	printMetadata(o.stdout, a.Metadata)
	return nil
}

// printMetadata prints an asset's metadata, compacted, on the line under it (nothing when absent).
func printMetadata(w io.Writer, m json.RawMessage) {
	if len(m) == 0 {
		return
	}
	var c bytes.Buffer
	if json.Compact(&c, m) != nil {
		c.Reset()
		c.Write(m)
	}
	fmt.Fprintf(w, "  metadata %s\n", c.Bytes())
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
	sub, fs, err := subcommand(o, "uploads", uploadsUsage, "want: uploads create FILE, or uploads get UPLOAD_ID", args, "create", "get")
	if fs == nil {
		return err
	}
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
