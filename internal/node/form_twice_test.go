package node_test

import "testing"

// TestFormFieldSentTwice: a media form with two data parts, or two upload_id parts, is refused with 422
// invalid_request before anything runs, as an option sent twice is (and as a url-encoded form's repeated
// field is). The last part used to win silently: the mark carried the second data object, and the second
// upload was consumed.
func TestFormFieldSentTwice(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	img := photo(t, 320, 256, 41)
	before, _ := balance(t, f, f.orgA)

	twice := postFields(t, f.base+"/watermarks/images", f.keyA, "", img, "data", `{"a":1}`, "data", `{"a":2}`)
	wantProblem(t, "data sent twice", twice, 422, "invalid_request")

	u1 := uploaded(t, f, f.keyA, "image", "one.jpg", img)
	u2 := uploaded(t, f, f.keyA, "image", "two.jpg", img)
	both := postFields(t, f.base+"/watermarks/images/async", f.keyA, "", nil,
		"data", `{"a":1}`, "upload_id", u1.UploadID, "upload_id", u2.UploadID)
	wantProblem(t, "upload_id sent twice", both, 422, "invalid_request")
	for _, u := range []uploadRes{u1, u2} {
		if g := getUpload(t, f, f.keyA, u.UploadID); g.Status != "received" {
			t.Fatalf("upload %s after the refused request: %s, want received (still usable)", u.UploadID, g.Status)
		}
	}
	if after, held := balance(t, f, f.orgA); after != before || held != 0 {
		t.Fatalf("balance %d held %d after refused requests, want %d and 0", after, held, before)
	}
}
