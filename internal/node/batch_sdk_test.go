package node_test

import (
	"encoding/json"
	"testing"
)

// TestBatchArchiveErrorsForSDKs: Etchv's SDKs read an archive refusal's code from `detail.code` (the only
// place they look); a request naming itself `etchv-*` gets it there, with the same status and top-level code
// as everyone else, for archive_not_requested (409) on a batch made without an archive.
func TestBatchArchiveErrorsForSDKs(t *testing.T) {
	t.Parallel()
	f := newBatchFixture(t, "scale", 10)
	b := zipBatch(t, f, "sdk-archive-1", 1)
	done := waitBatch(t, f, b.BatchID, "completed", "failed")
	url := f.base + "/watermarks/batches/" + done.BatchID + "/archive"
	for _, ua := range []string{"etchv-go/1.2.0", "etchv-python/1.2.0", "curl/8.5.0"} {
		r := sdkCall(t, "GET", url, f.key, ua, "", nil)
		var body struct {
			Code   string          `json:"code"`
			Detail json.RawMessage `json:"detail"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil || r.status != 409 || body.Code != "archive_not_requested" {
			t.Fatalf("%s: %d %s", ua, r.status, r.body)
		}
		var detail struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		isObject := json.Unmarshal(body.Detail, &detail) == nil
		if ua == "curl/8.5.0" {
			if isObject {
				t.Fatalf("a plain client got an object detail: %s", r.body)
			}
			continue
		}
		if !isObject || detail.Code != "archive_not_requested" || detail.Message == "" {
			t.Fatalf("%s: detail %s, want {code: archive_not_requested, message}", ua, body.Detail)
		}
	}
}
