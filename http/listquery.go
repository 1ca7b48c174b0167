package http

import (
	"strconv"

	"github.com/valyala/fasthttp"
)

// listQuery reads the query parameters of a list endpoint (GET /assets, /watermarks/batches, a webhook's or a
// storage destination's deliveries) under one rule for all of them: a parameter sent empty (`limit=`,
// `cursor=`) is taken as not sent. That is what most HTTP clients and Etchv's SDKs write for a value left unset,
// and what the job endpoints already did with `accelerator=`; before, the batch list took it so while the asset
// list and the delivery logs refused it with 422.
type listQuery struct{ args *fasthttp.Args }

func newListQuery(ctx *fasthttp.RequestCtx) listQuery { return listQuery{args: ctx.QueryArgs()} }

// value is the parameter name, and whether it was sent with a value (an empty one counts as not sent).
func (q listQuery) value(name string) (string, bool) {
	v := string(q.args.Peek(name))
	return v, v != ""
}

// limit is the page size: def when not sent, else an integer from 1 to most, or the one refusal every list
// answers for a bad one.
func (q listQuery) limit(def, most int) (int, *apiError) {
	v, ok := q.value("limit")
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, newAPIError(CodeInvalidRequest, "limit must be an integer from 1 to %d", most)
	}
	return n, nil
}
