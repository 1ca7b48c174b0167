package main

// `filigrane accelerator status|wake`: the server's GPU (spec 2.7, GET /accelerators/gpu and POST
// /accelerators/gpu/wake). It is not `filigrane gpu status|wake` because `filigrane gpu` is the local
// diagnostic of this machine's CUDA devices (gpu_cmd.go: no server, no key, its own exit codes); one command
// name answering for this machine in one subcommand and for a remote server in the next would be a trap.
// The name follows the API's path and the --accelerator flag of embed and detect.

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

const acceleratorUsage = `usage: filigrane accelerator status
       filigrane accelerator wake [--webhook-id wh_...]

The server's GPU (not this machine's: that is filigrane gpu info). status prints its state (ready, starting,
idle or unavailable) and, while it is starting or ready, when it is ready and until when it stays warm; it
starts nothing and costs nothing. wake starts an idle GPU, or keeps a ready one warm longer, and prints the
state the server answers; it costs no credits but needs a plan with GPU processing (403 plan_forbidden, exit
3, otherwise). A node without a usable GPU answers "unavailable" to both (exit 0: the command did what it
was asked; scripts read "status" from --json). --webhook-id also sends an accelerator.ready event to that
endpoint once the GPU is ready (docs/webhooks.md). Exit codes: docs/cli.md.

flags:
`

// acceleratorView is the accelerator resource (spec 2.7).
type acceleratorView struct {
	Accelerator string  `json:"accelerator"`
	Status      string  `json:"status"`
	WarmUntil   *string `json:"warm_until"`
	ReadyAt     *string `json:"ready_at"`
}

func runAccelerator(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := &clientOpts{stdout: stdout, stderr: stderr}
	return clientExit("accelerator", o, acceleratorCmd(ctx, args, o))
}

func acceleratorCmd(ctx context.Context, args []string, o *clientOpts) error {
	sub, fs, err := subcommand(o, "accelerator", acceleratorUsage, "want: accelerator status, or accelerator wake [--webhook-id wh_...]", args, "status", "wake")
	if fs == nil {
		return err
	}
	webhook := fs.String("webhook-id", "", "wake: the webhook endpoint that receives accelerator.ready once the GPU is ready")
	pos, err := parseClientFlags(fs, o, args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErr("accelerator %s takes no argument", sub)
	}
	if sub == "status" && *webhook != "" {
		return usageErr("--webhook-id goes with accelerator wake")
	}
	ctx, cancel := o.deadline(ctx)
	defer cancel()
	var st acceleratorView
	var body []byte
	if sub == "status" {
		body, _, err = o.getJSON(ctx, "/accelerators/gpu", &st)
	} else {
		// The body is optional; an empty one is a plain wake.
		var in any
		if *webhook != "" {
			in = map[string]string{"webhook_id": *webhook}
		}
		body, _, err = o.sendJSON(ctx, http.MethodPost, "/accelerators/gpu/wake", "", in, &st)
	}
	if err != nil {
		return err
	}
	if o.jsonOut {
		printRaw(o.stdout, body)
		return nil
	}
	orDash := func(s *string) string {
		if s == nil {
			return "-"
		}
		return *s
	}
	fmt.Fprintf(o.stdout, "accelerator %s\nstatus      %s\nready_at    %s\nwarm_until  %s\n",
		st.Accelerator, st.Status, orDash(st.ReadyAt), orDash(st.WarmUntil))
	return nil
}
