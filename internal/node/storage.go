package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"syscall"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/rs/zerolog"

	"filigrane/persistence"
	"filigrane/persistence/diskspace"
	"filigrane/persistence/fsblobs"
	"filigrane/persistence/opcount"
	"filigrane/persistence/pebblestore"
	"filigrane/persistence/s3blobs"
	"filigrane/persistence/s3store"
)

// S3Config names the shared object storage of a cluster.
type S3Config struct {
	// Endpoint is the server's URL, e.g. http://127.0.0.1:7070 or https://s3.example.net.
	Endpoint  string
	Bucket    string
	AccessKey string
	SecretKey string
	Region    string // default us-east-1
}

// Storage is where a node keeps its records and files. In single-node mode both live under the data directory
// (Pebble and the filesystem); in cluster mode the durable records and files live in object storage and Local
// holds only this node's own state.
type Storage struct {
	Store persistence.Store
	Blobs persistence.Blobs
	// Local is the node's Pebble store. In single-node mode it is Store itself.
	Local   persistence.Store
	Cluster bool
}

// Close closes what Open opened.
func (s *Storage) Close() error {
	var errs []error
	if s.Store != nil && s.Store != s.Local {
		errs = append(errs, s.Store.Close())
	}
	if s.Local != nil {
		errs = append(errs, s.Local.Close())
	}
	return errors.Join(errs...)
}

// OpenStorage opens a node's storage: the data directory always, object storage when s3 is set. It checks at
// start that the object store enforces conditional writes and gives MD5 ETags, since every actor's fencing
// depends on them.
func OpenStorage(ctx context.Context, dataDir string, s3 *S3Config, logger zerolog.Logger) (*Storage, error) {
	return OpenCountedStorage(ctx, dataDir, s3, logger, nil)
}

// OpenCountedStorage is OpenStorage with every store call and every object storage request counted in counts
// (persistence/opcount; nil counts nothing): a node's metrics show what its jobs cost in storage operations.
func OpenCountedStorage(ctx context.Context, dataDir string, s3 *S3Config, logger zerolog.Logger, counts *opcount.Metrics) (*Storage, error) {
	return OpenGuardedStorage(ctx, dataDir, s3, logger, counts, nil)
}

// OpenGuardedStorage is OpenCountedStorage keeping guard's reserve free on the data directory's filesystem
// (persistence/diskspace; nil keeps none): files under the data directory (single-node mode) are refused below
// the reserve, and writes to the node's Pebble below a quarter of it, with diskspace.ErrLow.
func OpenGuardedStorage(ctx context.Context, dataDir string, s3 *S3Config, logger zerolog.Logger, counts *opcount.Metrics, guard *diskspace.Guard) (*Storage, error) {
	layout := Layout{Root: dataDir}
	if err := layout.check(); err != nil {
		return nil, err
	}
	// Pebble replays its log into a table file at open: on a full disk that flush failed in a loop (77 MB of
	// errors in 30 s, measured) and the start never ended. Below the records' reserve, say so and stop.
	if err := guard.Records(); err != nil {
		return nil, fmt.Errorf("open store in %s: %w", dataDir, err)
	}
	opened, err := pebblestore.Open(layout.StoreDir(), logger.With().Str("component", "pebble").Logger())
	switch {
	case errors.Is(err, syscall.EWOULDBLOCK):
		// Pebble's lock file is taken: the one cause of this error an operator must know about.
		return nil, fmt.Errorf("open store in %s: another node or an admin command is using it (stop it first): %w", dataDir, err)
	case errors.Is(err, pebblestore.ErrCorrupt):
		return nil, fmt.Errorf("open store in %s: restore the data directory from a backup: %w", dataDir, err)
	case err != nil:
		return nil, fmt.Errorf("open store in %s: %w", dataDir, err)
	}
	pebble := diskspace.Store(opened, guard)
	if s3 == nil {
		local := opcount.Store(pebble, counts, "records", "pebble")
		blobs, err := fsblobs.OpenGuarded(layout.BlobDir(), guard)
		if err != nil {
			local.Close()
			return nil, fmt.Errorf("open blob store: %w", err)
		}
		return &Storage{Local: local, Store: local, Blobs: blobs}, nil
	}
	local := opcount.Store(pebble, counts, "local", "pebble")
	st := &Storage{Local: local}
	client, err := newS3Client(*s3, counts)
	if err != nil {
		local.Close()
		return nil, err
	}
	if err := ensureBucket(ctx, client, *s3); err != nil {
		local.Close()
		return nil, err
	}
	records, err := s3store.New(client, s3.Bucket, "records/")
	if err != nil {
		local.Close()
		return nil, fmt.Errorf("object store records: %w", err)
	}
	storeLog := logger.With().Str("component", "s3store").Logger()
	records.OnTorn(func(t s3store.Torn) {
		if t.Repaired {
			storeLog.Warn().Str("object", t.Object).Str("stale_etag", t.StaleETag).Bool("deleted", t.Tombstone).
				Msg("repaired a torn record: the object storage had kept a write's ETag without its body (a crash of versitygw with --sidecar metadata?); the record keeps its last complete state (docs/operations.md, Object storage)")
		} else {
			storeLog.Error().Str("object", t.Object).
				Msg("torn record: the object storage keeps an ETag without a body for this key and creates of it fail; remove the stale metadata (docs/operations.md, Object storage)")
		}
		counts.Torn("records", t.Repaired)
	})
	store := opcount.Store(records, counts, "records", "s3")
	if err := records.CheckConditionalWrites(ctx); err != nil {
		local.Close()
		return nil, fmt.Errorf("object storage at %s lacks what cluster mode needs (enforced conditional writes, MD5 ETags): %w", s3.Endpoint, err)
	}
	blobs, err := s3blobs.New(client, s3.Bucket, "blobs/")
	if err != nil {
		local.Close()
		return nil, fmt.Errorf("object store blobs: %w", err)
	}
	st.Store, st.Blobs, st.Cluster = store, blobs, true
	return st, nil
}

func newS3Client(c S3Config, counts *opcount.Metrics) (*minio.Client, error) {
	u, err := url.Parse(c.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, errors.New("s3 endpoint: want http://host:port or https://host") // the value may hold a secret
	}
	if u.User != nil {
		// The client signs with --s3-access-key and --s3-secret-key and never read these; every error that
		// named the endpoint wrote the password into the log.
		return nil, fmt.Errorf("s3 endpoint %s: credentials in the URL are not used; give them with --s3-access-key and --s3-secret-key (or FILIGRANE_S3_ACCESS_KEY, FILIGRANE_S3_SECRET_KEY)", u.Redacted())
	}
	if c.Bucket == "" {
		return nil, errors.New("s3 bucket is required with an s3 endpoint")
	}
	region := c.Region
	if region == "" {
		region = "us-east-1"
	}
	transport, err := minio.DefaultTransport(u.Scheme == "https")
	if err != nil {
		return nil, fmt.Errorf("s3 client transport: %w", err)
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds: credentials.NewStaticV4(c.AccessKey, c.SecretKey, ""), Secure: u.Scheme == "https", Region: region,
		Transport: opcount.Transport(transport, counts),
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client: %w", err)
	}
	return client, nil
}

// ensureBucket creates the bucket when it does not exist, so that a first cluster start needs no manual step.
func ensureBucket(ctx context.Context, client *minio.Client, c S3Config) error {
	ok, err := client.BucketExists(ctx, c.Bucket)
	if err != nil {
		return fmt.Errorf("reach object storage at %s: %w", c.Endpoint, err)
	}
	if ok {
		return nil
	}
	if err := client.MakeBucket(ctx, c.Bucket, minio.MakeBucketOptions{Region: c.Region}); err != nil {
		if exists, err2 := client.BucketExists(ctx, c.Bucket); err2 == nil && exists {
			return nil // another node created it meanwhile
		}
		return fmt.Errorf("create bucket %s: %w", c.Bucket, err)
	}
	return nil
}

// check refuses a data directory that holds other files and no store: a typo in --data (an operator's home
// directory) would otherwise get a store written among their files. A directory that does not exist yet, an
// empty one (a filesystem's lost+found aside: a freshly mounted volume) and one with a store/ (an earlier
// start's) are taken.
func (l Layout) check() error {
	if st, err := os.Stat(l.StoreDir()); err == nil && st.IsDir() {
		return nil
	}
	d, err := os.Open(l.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("data directory %s: %w", l.Root, err)
	}
	defer d.Close()
	// A few names are enough to decide and to show; a home directory may hold many.
	names, err := d.Readdirnames(8)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("data directory %s: %w", l.Root, err)
	}
	var others []string
	for _, name := range names {
		if name != "lost+found" {
			others = append(others, fmt.Sprintf("%q", name))
		}
	}
	if len(others) == 0 {
		return nil
	}
	return fmt.Errorf("data directory %s is not empty (%s) and holds no Filigrane store (no store/): "+
		"name a new or empty directory, or the one a node used before", l.Root, strings.Join(others, ", "))
}
