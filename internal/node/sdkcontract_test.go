package node_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// sdkCall sends a request as one of Etchv's SDKs does: it names itself in User-Agent.
func sdkCall(t *testing.T, method, url, key, userAgent, contentType string, body []byte) response {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("User-Agent", userAgent)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// TestSDKErrorDetailShapes: Etchv's Go and Python SDKs read an error's code only from a `detail` object
// ({code, message, limit}); every other client gets RFC 9457's string detail. Both bodies keep type, title,
// status and the top-level code.
func TestSDKErrorDetailShapes(t *testing.T) {
	f := newFixture(t)
	ct, body := form(t, []byte("not an image"), "x.png", "")
	for _, ua := range []string{"etchv-go/1.2.0", "etchv-python/1.2.0", "curl/8.5.0"} {
		// A bad key (401) and a file that is not an image (an input error) as the SDKs send them.
		for _, c := range []struct {
			key    string
			status int
			code   string
		}{{"fg_wrong", 401, "unauthorized"}, {f.keyA, 422, ""}} {
			r := sdkCall(t, "POST", f.base+"/watermarks/images", c.key, ua, ct, body)
			var p map[string]any
			if err := json.Unmarshal(r.body, &p); err != nil {
				t.Fatalf("%s: body %s: %v", ua, r.body, err)
			}
			code, _ := p["code"].(string)
			if r.status < 400 || (c.code != "" && code != c.code) || p["type"] == nil || p["title"] == nil || p["status"] != float64(r.status) {
				t.Fatalf("%s %s: %d %s", ua, c.key, r.status, r.body)
			}
			switch d := p["detail"].(type) {
			case map[string]any:
				if ua == "curl/8.5.0" || d["code"] != code || d["message"] == "" {
					t.Fatalf("%s: detail object %v for code %s", ua, d, code)
				}
			case string:
				if ua != "curl/8.5.0" || d == "" {
					t.Fatalf("%s: detail string %q", ua, d)
				}
			default:
				t.Fatalf("%s: detail %T in %s", ua, d, r.body)
			}
		}
	}
}

// TestSDKJobHeaders: a job's responses carry the job's request id in X-Request-ID (the SDKs read the job's
// id from it) and the accelerator also as X-Etchv-Accelerator.
func TestSDKJobHeaders(t *testing.T) {
	f := newFixture(t)
	img := photo(t, 800, 600, 5)
	r := post(t, f.base+"/watermarks/images/async", f.keyA, "sdk-headers-1", img, `{"a":1}`)
	if r.status != 202 {
		t.Fatalf("async embed: %d %s", r.status, r.body)
	}
	rc := decodeReceipt(t, r)
	if got := r.header.Get("X-Request-ID"); got != rc.RequestID {
		t.Fatalf("202: X-Request-ID %q, job %q", got, rc.RequestID)
	}
	res := waitResult(t, f, f.keyA, rc.ResultURL)
	if res.status != 200 || res.header.Get("X-Request-ID") != rc.RequestID {
		t.Fatalf("result: %d X-Request-ID %q, job %q", res.status, res.header.Get("X-Request-ID"), rc.RequestID)
	}
	if a, e := res.header.Get("X-Service-Accelerator"), res.header.Get("X-Etchv-Accelerator"); a != "cpu" || e != a {
		t.Fatalf("result accelerator headers %q / %q", a, e)
	}
	st := call(t, "GET", f.base+rc.StatusURL, f.keyA, nil)
	if st.status != 200 || st.header.Get("X-Request-ID") != rc.RequestID {
		t.Fatalf("status: %d X-Request-ID %q, job %q", st.status, st.header.Get("X-Request-ID"), rc.RequestID)
	}
}

// TestSDKURLEncodedUploadID: Etchv's Python SDK names an upload in an application/x-www-form-urlencoded body;
// it is marked like the multipart form. A url-encoded form cannot carry a file (415).
func TestSDKURLEncodedUploadID(t *testing.T) {
	f := newFixture(t)
	img := photo(t, 800, 600, 11)
	u := uploaded(t, f, f.keyA, "image", "p.jpg", img)
	body := []byte("upload_id=" + u.UploadID + "&data=%7B%22sdk%22%3A%22python%22%7D")
	r := sendRaw(t, f.base+"/watermarks/images", f.keyA, "", "application/x-www-form-urlencoded", body)
	if r.status != 200 || r.header.Get("X-Watermark-ID") == "" || len(r.body) == 0 {
		t.Fatalf("url-encoded upload_id: %d %s", r.status, r.body)
	}
	r = sendRaw(t, f.base+"/watermarks/images", f.keyA, "", "application/x-www-form-urlencoded", []byte("file=abc"))
	wantProblem(t, "url-encoded file", r, 415, "unsupported_media_type")
}
