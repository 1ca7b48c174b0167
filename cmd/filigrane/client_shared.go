// Generic pieces of the client command groups (assets, storage, webhooks, ...): subcommand and flag set, lists, cursor pages.

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
)

// listPages prints one page of a delivery log paged by an after cursor (the storage destinations' and the
// webhook endpoints' logs), or every page from after on with all. split takes a decoded page apart into its
// items and the next page's cursor: the two APIs name their item lists differently. With --json each page is
// printed raw as the server sent it; otherwise one line an item, "no deliveries" for an empty log, and the
// flag that fetches the next page when there is one and all is off.
func listPages[P, T any](ctx context.Context, o *clientOpts, path string, q url.Values, after string, all bool,
	split func(*P) ([]T, *string), print func(io.Writer, T)) error {
	for {
		if after != "" {
			q.Set("after", after)
		}
		p := path
		if len(q) > 0 {
			p += "?" + q.Encode()
		}
		var page P
		body, _, err := o.getJSON(ctx, p, &page)
		if err != nil {
			return err
		}
		items, next := split(&page)
		if o.jsonOut {
			printRaw(o.stdout, body)
		} else {
			for _, it := range items {
				print(o.stdout, it)
			}
		}
		if next == nil || *next == "" {
			if !o.jsonOut && len(items) == 0 && after == "" {
				fmt.Fprintln(o.stdout, "no deliveries")
			}
			return nil
		}
		if !all {
			if !o.jsonOut {
				fmt.Fprintf(o.stdout, "next page: --after %s\n", *next)
			}
			return nil
		}
		after = *next
	}
}

// listAndPrint prints a list answer (a JSON array) one line an item, none when it is empty, or raw with
// --json.
func listAndPrint[T any](ctx context.Context, o *clientOpts, path, none string, print func(io.Writer, T)) error {
	var list []T
	body, _, err := o.getJSON(ctx, path, &list)
	if err != nil {
		return err
	}
	if o.jsonOut {
		printRaw(o.stdout, body)
		return nil
	}
	if len(list) == 0 {
		fmt.Fprintln(o.stdout, none)
	}
	for _, it := range list {
		print(o.stdout, it)
	}
	return nil
}

// subcommand reads the subcommand of a command group (filigrane GROUP SUB ...): args[0], one of subs. It
// returns the subcommand with its flag set, named "filigrane GROUP SUB", whose usage prints usage. With no
// flag set returned the command is answered: help (-h, --help, help) printed usage to stdout (err nil);
// anything else printed it to stderr and err is the usage error want.
func subcommand(o *clientOpts, group, usage, want string, args []string, subs ...string) (string, *flag.FlagSet, error) {
	if len(args) == 0 || !slices.Contains(subs, args[0]) {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(o.stdout, usage)
			return "", nil, nil
		}
		fmt.Fprint(o.stderr, usage)
		return "", nil, usageErr("%s", want)
	}
	fs := flag.NewFlagSet("filigrane "+group+" "+args[0], flag.ContinueOnError)
	fs.SetOutput(o.stderr)
	fs.Usage = func() { fmt.Fprint(o.stderr, usage); fs.PrintDefaults() }
	return args[0], fs, nil
}
