package main

// `filigrane webhooks list|create`: the organization's webhook endpoints (docs/webhooks.md).

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
)

const webhooksUsage = `usage: filigrane webhooks list [--json]
       filigrane webhooks create URL [--description TEXT] [--events TYPE,TYPE...] [--json]

list prints the webhook endpoints; create adds one and prints its signing secret (shown only this once).
Exit codes: docs/cli.md.

flags:
`

// webhookView is the endpoint resource (docs/webhooks.md).
type webhookView struct {
	ID            string   `json:"id"`
	URL           string   `json:"url"`
	Description   string   `json:"description"`
	Events        []string `json:"events"`
	Enabled       bool     `json:"enabled"`
	SigningSecret string   `json:"signing_secret"`
}

func runWebhooks(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := &clientOpts{stdout: stdout, stderr: stderr}
	return clientExit("webhooks", o, webhooksCmd(ctx, args, o))
}

func webhooksCmd(ctx context.Context, args []string, o *clientOpts) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "create") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(o.stdout, webhooksUsage)
			return nil
		}
		fmt.Fprint(o.stderr, webhooksUsage)
		return usageErr("want: webhooks list, or webhooks create URL")
	}
	sub := args[0]
	fs := flag.NewFlagSet("filigrane webhooks "+sub, flag.ContinueOnError)
	fs.SetOutput(o.stderr)
	fs.Usage = func() { fmt.Fprint(o.stderr, webhooksUsage); fs.PrintDefaults() }
	desc := fs.String("description", "", "create: a description of the endpoint")
	events := fs.String("events", "", "create: comma-separated event types it receives (default: every type)")
	pos, err := parseClientFlags(fs, o, args[1:])
	if err != nil {
		return err
	}
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	if sub == "list" {
		if len(pos) != 0 {
			return usageErr("webhooks list takes no argument")
		}
		var list []webhookView
		body, _, err := o.getJSON(ctx, "/webhooks", &list)
		if err != nil {
			return err
		}
		if o.jsonOut {
			printRaw(o.stdout, body)
			return nil
		}
		if len(list) == 0 {
			fmt.Fprintln(o.stdout, "no webhook endpoints")
		}
		for _, w := range list {
			printWebhook(o.stdout, w)
		}
		return nil
	}
	if len(pos) != 1 {
		return usageErr("want exactly one URL, got %d arguments", len(pos))
	}
	req := map[string]any{"url": pos[0]}
	if *desc != "" {
		req["description"] = *desc
	}
	if *events != "" {
		req["events"] = strings.Split(*events, ",")
	}
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode webhook: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url+"/webhooks", bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := o.do(hreq, true)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var w webhookView
	body, _, err := readJSON(resp, &w)
	if err != nil {
		return err
	}
	if o.jsonOut {
		printRaw(o.stdout, body)
		return nil
	}
	printWebhook(o.stdout, w)
	fmt.Fprintf(o.stdout, "signing_secret %s (shown only now: keep it to verify deliveries)\n", w.SigningSecret)
	return nil
}

func printWebhook(w io.Writer, v webhookView) {
	ev := "all events"
	if len(v.Events) > 0 {
		ev = strings.Join(v.Events, ",")
	}
	state := "enabled"
	if !v.Enabled {
		state = "disabled"
	}
	fmt.Fprintf(w, "%s  %s  %s  %s", v.ID, v.URL, state, ev)
	if v.Description != "" {
		fmt.Fprintf(w, "  %q", v.Description)
	}
	fmt.Fprintln(w)
}
