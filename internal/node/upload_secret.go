package node

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"filigrane/persistence"
)

// keyUploadSecret holds the HMAC secret of signed upload URLs when none is configured: random once per data
// directory (or shared Store), so that URLs handed out before a restart stay valid after it.
const keyUploadSecret = "node/upload-secret"

// uploadSecret returns the configured secret, or the one persisted in the Store, creating it on first use.
// Two nodes starting at once on one Store agree: the create is create-only and the loser reads the winner's.
func uploadSecret(ctx context.Context, store persistence.Store, configured []byte) ([]byte, error) {
	if len(configured) > 0 {
		if len(configured) < 16 {
			return nil, errors.New("the upload secret needs at least 16 bytes")
		}
		return configured, nil
	}
	for range 3 {
		it, err := store.Get(ctx, []byte(keyUploadSecret))
		if err == nil {
			if len(it.Value) < 16 {
				return nil, fmt.Errorf("stored %s is %d bytes, want at least 16", keyUploadSecret, len(it.Value))
			}
			return it.Value, nil
		}
		if !errors.Is(err, persistence.ErrNotFound) {
			return nil, fmt.Errorf("read %s: %w", keyUploadSecret, err)
		}
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("generate upload secret: %w", err)
		}
		_, err = store.CompareAndSet(ctx, []byte(keyUploadSecret), persistence.NoVersion, secret)
		if err == nil {
			return secret, nil
		}
		if !errors.Is(err, persistence.ErrVersionMismatch) {
			return nil, fmt.Errorf("save %s: %w", keyUploadSecret, err)
		}
	}
	return nil, fmt.Errorf("save %s: conflicting writers", keyUploadSecret)
}
