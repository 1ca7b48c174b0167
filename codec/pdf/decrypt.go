package pdf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Detection of encrypted documents. A PDF encrypted with an empty user password (an owner password only: the
// usual "protected" document, which every viewer opens without asking) is read for detection: a document marked
// and then protected by its owner must still be found. Marking refuses it (a rewrite would drop the protection).
// The parser does not read it directly: the object streams of an encrypted file are encrypted, so the scan that
// bounds the parser's memory (objstm.go) cannot count them. mutool (in its own memory-limited process) writes
// a decrypted copy, which is scanned, estimated and parsed as any other file. A document that needs a password
// is refused as encrypted.

// decrypt writes src without its encryption to dst (mutool clean -D), which succeeds only when the user
// password is empty.
func (a *Adapter) decrypt(ctx context.Context, src, dst string, lim Limits) error {
	err := a.clean(ctx, src, dst, lim, "-D")
	switch {
	case CodeOf(err) == CodeTool:
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("pdf: decrypt: %w", ctx.Err())
	case err != nil && strings.Contains(err.Error(), "file size limit exceeded"):
		return &Error{Code: CodeTooLarge, Reason: fmt.Sprintf("the PDF's decrypted copy is larger than %d bytes", 2*lim.MaxBytes), Err: err}
	case err != nil && strings.Contains(err.Error(), "password"):
		return &Error{Code: CodeEncrypted, Reason: "the PDF is encrypted with a password; remove the encryption and send it again", Err: err}
	case err != nil:
		return &Error{Code: CodeBroken, Reason: "the PDF is encrypted and could not be decrypted", Err: err}
	}
	if st, err := os.Stat(dst); err != nil || st.Size() > 2*lim.MaxBytes {
		return refuse(CodeTooLarge, "the PDF's decrypted copy is larger than %d bytes", 2*lim.MaxBytes)
	}
	return nil
}

// openDecrypted opens the decrypted copy of src for detection, into doc (whose temporary directory holds it).
func (a *Adapter) openDecrypted(ctx context.Context, doc *document, src string) (*document, error) {
	dir, err := os.MkdirTemp("", "filigrane-pdf-decrypt-")
	if err != nil {
		return nil, fmt.Errorf("pdf: decrypt: %w", err)
	}
	doc.tmpDir = dir
	dec := filepath.Join(dir, "decrypted.pdf")
	fail := func(err error) (*document, error) {
		return nil, doc.openFailed(ctx, err, "the PDF is encrypted and its decrypted copy could not be read")
	}
	if err := a.decrypt(ctx, src, dec, doc.lim); err != nil {
		return fail(err)
	}
	if err := prescan(dec, doc.lim); err != nil {
		return fail(err)
	}
	doc.info = Info{}
	if err := doc.load(ctx, dec, false); err != nil {
		return fail(err)
	}
	doc.path = dec
	return doc, nil
}

// scanDecrypted is scanObjects of src's decrypted copy, for the memory estimate of a detection (the parse reads
// that copy); the copy is removed before it returns.
func (a *Adapter) scanDecrypted(ctx context.Context, src string, lim Limits) (objectScan, error) {
	dir, err := os.MkdirTemp("", "filigrane-pdf-decrypt-")
	if err != nil {
		return objectScan{}, fmt.Errorf("pdf: decrypt: %w", err)
	}
	defer os.RemoveAll(dir)
	dec := filepath.Join(dir, "decrypted.pdf")
	if err := a.decrypt(ctx, src, dec, lim); err != nil {
		return objectScan{}, err
	}
	return scanObjects(dec, lim.MaxDecodeBytes, lim.MaxObjects, lim.MaxTokens)
}
