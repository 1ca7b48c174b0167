package node_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filigrane/internal/node"
)

// throwawayCA makes a CA and a server certificate for 127.0.0.1 signed by it, writes the server's PEM files
// into dir, and returns a client that trusts only that CA.
func throwawayCA(t *testing.T, dir string) (certFile, keyFile string, client *http.Client) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "filigrane test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return certFile, keyFile, &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// TestTLSListeners: with --tls-cert/--tls-key both listeners answer HTTPS, signed upload URLs are https://
// (Etchv's SDKs refuse http:// ones), a file PUT over TLS is received and then marked, and plain HTTP to
// the TLS port gets no answer.
func TestTLSListeners(t *testing.T) {
	t.Parallel()
	certFile, keyFile, client := throwawayCA(t, t.TempDir())
	f := newFixture(t, func(c *node.Config) { c.TLSCertFile, c.TLSKeyFile = certFile, keyFile })
	base := "https://" + f.n.APIAddr()
	do := func(method, url, contentType string, body []byte) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, url, bytes.NewReader(body))
		if !strings.Contains(url, "/uploads/") { // signed upload URLs take no key
			req.Header.Set("X-API-Key", f.keyA)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, b
	}
	img := photo(t, 800, 600, 9)
	res, b := do("POST", base+"/uploads", "application/json", []byte(fmt.Sprintf(`{"kind":"image","filename":"p.jpg","size":%d}`, len(img))))
	if res.StatusCode != 201 {
		t.Fatalf("create upload over TLS: %d %s", res.StatusCode, b)
	}
	var up struct {
		UploadID string `json:"upload_id"`
		Upload   struct {
			URL string `json:"url"`
		} `json:"upload"`
	}
	if err := json.Unmarshal(b, &up); err != nil || !strings.HasPrefix(up.Upload.URL, "https://"+f.n.UploadAddr()+"/") {
		t.Fatalf("signed upload URL %q (want https:// on the upload listener): %v", up.Upload.URL, err)
	}
	if res, b := do("PUT", up.Upload.URL, "image/jpeg", img); res.StatusCode != 200 {
		t.Fatalf("PUT over TLS: %d %s", res.StatusCode, b)
	}
	ct, body := uploadForm(t, up.UploadID, `{"a":1}`)
	res, b = do("POST", base+"/watermarks/images", ct, body)
	if res.StatusCode != 200 || res.Header.Get("X-Watermark-ID") == "" {
		t.Fatalf("embed of the upload over TLS: %d %s", res.StatusCode, b)
	}
	// The console over TLS tells browsers to keep to https (HSTS) and keeps its window to itself.
	res, err := client.Get(base + "/console/sign-in") // no API key: the console takes none
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 ||
		!strings.HasPrefix(res.Header.Get("Strict-Transport-Security"), "max-age=") || res.Header.Get("Cross-Origin-Opener-Policy") != "same-origin" {
		t.Fatalf("console sign-in page over TLS: %d, HSTS %q, COOP %q", res.StatusCode,
			res.Header.Get("Strict-Transport-Security"), res.Header.Get("Cross-Origin-Opener-Policy"))
	}
	// Plain HTTP to the TLS listener is not served.
	plain := &http.Client{Timeout: 10 * time.Second}
	if r, err := plain.Get("http://" + f.n.APIAddr() + "/healthz"); err == nil {
		r.Body.Close()
		if r.StatusCode == 200 {
			t.Fatal("plain HTTP was answered 200 on the TLS listener")
		}
	}
}

// uploadForm is a multipart form naming an upload.
func uploadForm(t *testing.T, uploadID, data string) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	_ = w.WriteField("data", data)
	_ = w.WriteField("upload_id", uploadID)
	_ = w.Close()
	return w.FormDataContentType(), buf.Bytes()
}
