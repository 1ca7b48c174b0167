package main

// `filigrane storage list|get|create|update|verify|delete|deliveries|move|delivery|retry`: the organization's
// storage destinations and their deliveries (docs/storage.md), against a running server.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"

	"filigrane/internal/hiddenchar"
)

const storageUsage = `usage: filigrane storage list [--json]
       filigrane storage get DST_ID
       filigrane storage create --name N --endpoint HOST[:PORT] --bucket B --access-key-id ID [--region R]
                                [--prefix P] [--secure true|false] [--path-style true|false] [--enabled true|false]
       filigrane storage update DST_ID [--name N] [--endpoint E] [--bucket B] [--region R] [--prefix P]
                                [--secure true|false] [--path-style true|false] [--enabled true|false]
                                [--access-key-id ID (with the secret)]
       filigrane storage verify DST_ID
       filigrane storage delete DST_ID
       filigrane storage deliveries DST_ID [--limit N] [--after STD_ID] [--all]
       filigrane storage move DST_ID ASSET_ID [--storage-key KEY]
       filigrane storage delivery STD_ID
       filigrane storage retry STD_ID

A destination is a bucket of yours on an S3-compatible server; an embed that names it writes its result there.
The secret access key is read from $FILIGRANE_S3_SECRET_ACCESS_KEY (never from a flag, so that it stays out of
the process list); it is never shown again. verify writes, reads and deletes a probe object and must succeed
before an embed can name the destination. deliveries lists a destination's deliveries, newest first; move
copies an earlier result (an asset) into the destination; delivery shows one delivery; retry attempts a failed
one again. Creating, changing, verifying, moving and retrying need an owner's or admin's key. Exit codes:
docs/cli.md.

flags:
`

// envStorageSecret holds the secret access key for create and update.
const envStorageSecret = "FILIGRANE_S3_SECRET_ACCESS_KEY"

// destinationView is the part of the destination resource the client prints.
type destinationView struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	Endpoint   string  `json:"endpoint"`
	Bucket     string  `json:"bucket"`
	Prefix     string  `json:"prefix"`
	Enabled    bool    `json:"enabled"`
	VerifiedAt *string `json:"verified_at"`
	LastError  *string `json:"last_error"`
}

// deliveryView is the part of the storage delivery resource the client prints.
type deliveryView struct {
	ID            string  `json:"id"`
	Status        string  `json:"status"`
	AssetID       string  `json:"asset_id"`
	DestinationID string  `json:"destination_id"`
	URI           string  `json:"uri"`
	Attempts      int     `json:"attempts"`
	LastError     *string `json:"last_error"`
}

type deliveryPage struct {
	Items      []deliveryView `json:"items"`
	NextCursor *string        `json:"next_cursor"`
}

func runStorage(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := &clientOpts{stdout: stdout, stderr: stderr}
	return clientExit("storage", o, storageCmd(ctx, args, o))
}

func storageCmd(ctx context.Context, args []string, o *clientOpts) error {
	sub, fs, err := subcommand(o, "storage", storageUsage, "want: storage list|get|create|update|verify|delete|deliveries|move|delivery|retry", args, "list", "get", "create", "update", "verify", "delete", "deliveries", "move", "delivery", "retry")
	if fs == nil {
		return err
	}
	// create/update fields; update sends only the flags given.
	name := fs.String("name", "", "create, update: the destination's name")
	endpoint := fs.String("endpoint", "", "create, update: the S3 server, host[:port]")
	bucket := fs.String("bucket", "", "create, update: the bucket")
	region := fs.String("region", "", "create, update: the bucket's region")
	prefix := fs.String("prefix", "", "create, update: key prefix in the bucket (default: the server's, filigrane)")
	accessKey := fs.String("access-key-id", "", "create, update: the access key id (the secret comes from $"+envStorageSecret+")")
	secure := fs.String("secure", "true", "create, update: HTTPS to the endpoint (true or false)")
	pathStyle := fs.String("path-style", "false", "create, update: path-style bucket addressing (true or false)")
	enabled := fs.String("enabled", "true", "create, update: whether embeds may name it (true or false)")
	limit := fs.Int("limit", 0, "deliveries: deliveries per page, 1 to 100 (default: the server's, 50)")
	after := fs.String("after", "", "deliveries: next_cursor of the previous page")
	all := fs.Bool("all", false, "deliveries: follow next_cursor to the last page")
	storageKey := fs.String("storage-key", "", "move: object key under the destination's prefix (default: <asset id>/<file name>)")
	pos, err := parseClientFlags(fs, o, args[1:])
	if err != nil {
		return err
	}
	ctx, cancel := o.deadline(ctx)
	defer cancel()
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	switch sub {
	case "list":
		if len(pos) != 0 {
			return usageErr("storage list takes no argument")
		}
		return listAndPrint(ctx, o, "/storage/destinations", "no storage destinations", printDestination)
	case "create":
		if len(pos) != 0 {
			return usageErr("storage create takes flags only (--name, --endpoint, --bucket, --access-key-id)")
		}
		for _, f := range []string{"name", "endpoint", "bucket", "access-key-id"} {
			if !set[f] {
				return usageErr("storage create needs --%s", f)
			}
		}
		req, err := destinationFields(set, map[string]string{"name": *name, "endpoint": *endpoint, "bucket": *bucket,
			"region": *region, "prefix": *prefix, "access-key-id": *accessKey, "secure": *secure, "path-style": *pathStyle,
			"enabled": *enabled}, true)
		if err != nil {
			return err
		}
		return o.destinationCall(ctx, http.MethodPost, "/storage/destinations", req)
	case "move":
		if len(pos) != 2 {
			return usageErr("want: storage move DST_ID ASSET_ID")
		}
		req := map[string]any{"asset_id": pos[1]}
		if set["storage-key"] {
			req["key"] = *storageKey
		}
		return o.deliveryCall(ctx, http.MethodPost, "/storage/destinations/"+url.PathEscape(pos[0])+"/deliveries", req)
	}
	id, err := oneArg(pos, map[bool]string{true: "STD_ID", false: "DST_ID"}[sub == "delivery" || sub == "retry"])
	if err != nil {
		return err
	}
	dst := "/storage/destinations/" + url.PathEscape(id)
	switch sub {
	case "get":
		return o.destinationCall(ctx, http.MethodGet, dst, nil)
	case "update":
		req, err := destinationFields(set, map[string]string{"name": *name, "endpoint": *endpoint, "bucket": *bucket,
			"region": *region, "prefix": *prefix, "access-key-id": *accessKey, "secure": *secure, "path-style": *pathStyle,
			"enabled": *enabled}, false)
		if err != nil {
			return err
		}
		if len(req) == 0 {
			return usageErr("storage update needs at least one field flag")
		}
		return o.destinationCall(ctx, http.MethodPatch, dst, req)
	case "verify":
		return o.destinationCall(ctx, http.MethodPost, dst+"/verify", nil)
	case "delete":
		if _, _, err := o.sendJSON(ctx, http.MethodDelete, dst, "", nil, nil); err != nil {
			return err
		}
		if !o.jsonOut {
			fmt.Fprintf(o.stdout, "deleted %s\n", id)
		}
		return nil
	case "deliveries":
		q := url.Values{}
		if *limit != 0 {
			q.Set("limit", strconv.Itoa(*limit))
		}
		return listPages(ctx, o, dst+"/deliveries", q, *after, *all, func(p *deliveryPage) ([]deliveryView, *string) {
			return p.Items, p.NextCursor
		}, printDelivery)
	case "delivery":
		return o.deliveryCall(ctx, http.MethodGet, "/storage/deliveries/"+url.PathEscape(id), nil)
	default: // retry
		return o.deliveryCall(ctx, http.MethodPost, "/storage/deliveries/"+url.PathEscape(id)+"/retry", nil)
	}
}

// destinationFields builds a create or update body from the flags given; the secret comes from the
// environment, so that it never shows in a process list or a shell history.
func destinationFields(set map[string]bool, v map[string]string, create bool) (map[string]any, error) {
	req := map[string]any{}
	if create {
		req["provider"] = "s3"
	}
	for flagName, field := range map[string]string{"name": "name", "endpoint": "endpoint", "bucket": "bucket",
		"region": "region", "prefix": "prefix"} {
		if set[flagName] {
			req[field] = v[flagName]
		}
	}
	for flagName, field := range map[string]string{"secure": "secure", "path-style": "path_style", "enabled": "enabled"} {
		if !set[flagName] {
			continue
		}
		b, err := strconv.ParseBool(v[flagName])
		if err != nil {
			return nil, usageErr("--%s must be true or false, not %q", flagName, v[flagName])
		}
		req[field] = b
	}
	if set["access-key-id"] {
		secret := os.Getenv(envStorageSecret)
		if secret == "" {
			return nil, usageErr("--access-key-id needs its secret in $%s", envStorageSecret)
		}
		req["access_key_id"], req["secret_access_key"] = v["access-key-id"], secret
	}
	return req, nil
}

func (o *clientOpts) destinationCall(ctx context.Context, method, path string, req map[string]any) error {
	return sendAndPrint(ctx, o, method, path, req, printDestination)
}

func (o *clientOpts) deliveryCall(ctx context.Context, method, path string, req map[string]any) error {
	return sendAndPrint(ctx, o, method, path, req, printDelivery)
}

// sendAndPrint sends req (none when nil) and prints the answer as T, or raw with --json.
func sendAndPrint[T any](ctx context.Context, o *clientOpts, method, path string, req map[string]any, print func(io.Writer, T)) error {
	var v T
	var in any
	if req != nil {
		in = req
	}
	body, _, err := o.sendJSON(ctx, method, path, "", in, &v)
	if err != nil {
		return err
	}
	if o.jsonOut {
		printRaw(o.stdout, body)
		return nil
	}
	print(o.stdout, v)
	return nil
}

func printDestination(w io.Writer, d destinationView) {
	state := "enabled"
	if !d.Enabled {
		state = "disabled"
	}
	verified := "not verified"
	if d.VerifiedAt != nil {
		verified = "verified " + *d.VerifiedAt
	}
	// Names are quoted and the other fields' hidden characters escaped (a destination stored before they were
	// refused: docs/api.md, "Hidden characters"), so none reorders or splits the line.
	fmt.Fprintf(w, "%s  %q  %s/%s/%s  %s  %s", d.ID, d.Name, hiddenchar.Escape(d.Endpoint), hiddenchar.Escape(d.Bucket),
		hiddenchar.Escape(d.Prefix), state, verified)
	if d.LastError != nil && *d.LastError != "" {
		fmt.Fprintf(w, "  last error: %s", remoteText(*d.LastError))
	}
	fmt.Fprintln(w)
}

// remoteText is an error a remote server chose (an S3 endpoint's message, a webhook receiver's certificate
// names) as a terminal line shows it. The node stores such text escaped and bounded (docs/api.md, "Text from
// remote servers"); a record stored before that rule, or a server in front of the node, may still hold an
// ANSI escape sequence that would colour, move or retitle the operator's terminal, or write its clipboard,
// or a right-to-left override: escaped here as well.
func remoteText(s string) string { return hiddenchar.Remote(s, hiddenchar.RemoteLimit) }

func printDelivery(w io.Writer, d deliveryView) {
	fmt.Fprintf(w, "%s  %s  %s -> %s  attempts %d", d.ID, d.Status, d.AssetID, d.DestinationID, d.Attempts)
	if d.URI != "" {
		fmt.Fprintf(w, "  %s", hiddenchar.Escape(d.URI))
	}
	if d.LastError != nil && *d.LastError != "" {
		fmt.Fprintf(w, "  last error: %s", remoteText(*d.LastError))
	}
	fmt.Fprintln(w)
}
