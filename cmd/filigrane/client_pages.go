package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
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
