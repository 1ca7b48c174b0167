package http

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// FuzzParseDestinationBody feeds arbitrary bodies to the storage destination parser: it must never panic,
// must refuse with an *apiError of a documented code, and what it accepts carries no more than was sent (the
// credentials text, when used, yields both keys).
func FuzzParseDestinationBody(f *testing.F) {
	for _, s := range []string{
		`{"name":"a","endpoint":"s3.example.net","bucket":"bkt","access_key_id":"k","secret_access_key":"s"}`,
		`{"provider":"s3","bucket":"bkt","credentials":"{\"access_key_id\":\"k\",\"secret_access_key\":\"s\"}","visibility":"private","role_arn":null}`,
		`{"credentials":"{\"access_key_id\":\"k\"}"}`,
		`{"role_arn":"arn:aws:iam::1:role/x"}`,
		`{"enabled":false}`,
		`{"colour":1}`,
		`[1,2]`,
		`{"credentials":"{\"access_key_id\":\"k\",\"secret_access_key\":\"s\",\"x\":1}"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetBody(body)
		in, aerr := parseDestinationBody(&ctx)
		if aerr != nil {
			switch aerr.code {
			case CodeTooLarge, CodeMalformedJSON, CodeInvalidRequest:
			default:
				t.Fatalf("undocumented code %s for %q", aerr.code, body)
			}
			return
		}
		// Decoding never grows text beyond 3 bytes per input byte (an invalid byte becomes U+FFFD).
		if len(in.AccessKey)+len(in.SecretKey)+len(in.Name)+len(in.Bucket) > 3*len(body) {
			t.Fatalf("accepted more than was sent: %+v from %q", in, body)
		}
		if strings.Contains(string(body), `"credentials":"{`) && (in.AccessKey == "") != (in.SecretKey == "") {
			t.Fatalf("credentials gave one key without the other: %+v from %q", in, body)
		}
	})
}
