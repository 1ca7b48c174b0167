package pdf

import (
	"context"
	"fmt"
	"os"
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

// openDecrypted opens the input's decrypted copy for detection, into doc (the File holds the copy).
func (f *File) openDecrypted(ctx context.Context, doc *document) (*document, error) {
	fail := func(err error) (*document, error) {
		return nil, doc.openFailed(ctx, err, "the PDF is encrypted and its decrypted copy could not be read")
	}
	dec, err := f.decrypted(ctx, doc.lim)
	if err != nil && !isRefusal(err) && ctx.Err() == nil {
		doc.close()
		return nil, err // the node's failure (its temporary directory), not the file's
	}
	if err != nil {
		return fail(err)
	}
	if err := f.prescan(dec, doc.lim); err != nil {
		return fail(err)
	}
	doc.info = Info{}
	if err := doc.load(ctx, dec, false); err != nil {
		return fail(err)
	}
	doc.path = dec
	return doc, nil
}
