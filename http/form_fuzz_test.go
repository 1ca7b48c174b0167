package http

import (
	"bytes"
	"context"
	"errors"
	"mime/multipart"
	"strings"
	"testing"

	"filigrane/persistence/fsblobs"
)

func multipartSeed(fields map[string]string, file []byte) (string, []byte) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		mw.WriteField(k, v)
	}
	if file != nil {
		fw, _ := mw.CreateFormFile("file", "a.jpg")
		fw.Write(file)
	}
	mw.Close()
	return mw.FormDataContentType(), buf.Bytes()
}

// FuzzReadMediaForm feeds arbitrary multipart bodies to the form reader: it must never panic, must answer
// an *apiError for anything it refuses, and must leave no file behind when it refuses.
func FuzzReadMediaForm(f *testing.F) {
	ct, body := multipartSeed(map[string]string{"data": `{"a":1}`}, []byte("filebytes"))
	f.Add(ct, body)
	ct2, body2 := multipartSeed(map[string]string{"upload_id": "upl_1"}, nil)
	f.Add(ct2, body2)
	f.Add(ct, body[:len(body)/2])
	f.Add("multipart/form-data; boundary=x", []byte("--x\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n"+string(bytes.Repeat([]byte("z"), 200))+"\r\n--x--\r\n"))
	f.Add("text/plain", []byte("hello"))
	ct3, body3 := multipartSeed(map[string]string{"accelerator": "gpu", "webhook_id": "wh_1", "storage_key": "k"}, []byte("file"))
	f.Add(ct3, body3)
	f.Add(ct3, body3[:len(body3)-20])
	f.Add("application/x-www-form-urlencoded", []byte("upload_id=upl_1&data=%7B%22a%22%3A1%7D"))
	f.Add("application/x-www-form-urlencoded; charset=utf-8", []byte("upload_id=a&upload_id=b&file=x"))
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		root := t.TempDir()
		blobs, err := fsblobs.Open(root)
		if err != nil {
			t.Fatal(err)
		}
		form, err := readMediaForm(context.Background(), contentType, bytes.NewReader(body), blobs, "inputs/o/r/x", 100)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) {
				t.Fatalf("refusal without a problem code: %v", err)
			}
			if strings.Contains(ae.detail, "inputs/") || strings.Contains(ae.detail, root) {
				t.Fatalf("refusal quotes the blob key or path: %q", ae.detail)
			}
			if _, serr := blobs.Stat(context.Background(), "inputs/o/r/x"); serr == nil {
				t.Fatalf("refused form left its file stored (%v)", err)
			}
			return
		}
		if form.File != nil && (form.File.Info.Size > 100 || form.File.Info.Size == 0) {
			t.Fatalf("accepted a file of %d bytes", form.File.Info.Size)
		}
		if len(form.Data) > maxDataBytes {
			t.Fatalf("accepted %d bytes of data", len(form.Data))
		}
	})
}

// FuzzValidateData: the data field validator never panics and only accepts non-empty JSON objects.
func FuzzValidateData(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{}`, `[]`, `{"a":`, `{"b":1e400}`, `{"x":{"y":[1,2,{"z":null}]}}`, "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		id, aerr := validateData(data)
		if aerr == nil && (len(data) == 0 || id.String() == "") {
			t.Fatalf("accepted %q", data)
		}
		if aerr != nil && aerr.code != CodeInvalidData {
			t.Fatalf("code %s for bad data", aerr.code)
		}
	})
}
