package actors

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"filigrane/actors/assetid"
	"filigrane/actors/jobstate"
	"filigrane/persistence"
)

// Storage keys of the asset library.
const (
	prefixAsset      = "asset/"    // asset/<asset_id> -> Asset
	prefixAssetIndex = "assetidx/" // assetidx/<org_id>/<inverted created ns, 20 digits>/<asset_id> -> "<kind>/<media_type>"
	prefixWatermarks = "wmidx/"    // wmidx/<org_id>/<watermark_id>/<asset_id> -> empty
	// prefixAssetWM lists an organization's assets of one watermark id newest first (the watermark_id filter).
	prefixAssetWM = "assetwm/" // assetwm/<org_id>/<watermark_id>/<inverted created ns, 20 digits>/<asset_id> -> "<kind>/<media_type>"
	// prefixAssetExpiry orders hosted files by the end of their retention, for the sweeper.
	prefixAssetExpiry = "assetexp/" // assetexp/<file_expires_at unix seconds, 20 digits>/<asset_id> -> empty
)

// Asset kinds.
const (
	AssetSource      = assetid.KindSource
	AssetWatermarked = assetid.KindWatermarked
)

// Asset is an asset record (spec 2.6). The file lives in Blobs under BlobKey.
type Asset struct {
	ID            string         `msgpack:"id"`
	OrgID         string         `msgpack:"org_id"`
	Name          string         `msgpack:"name"`
	Version       int64          `msgpack:"version"`
	Kind          string         `msgpack:"kind"`
	ParentAssetID string         `msgpack:"parent_asset_id"`
	MediaType     string         `msgpack:"media_type"`
	Format        string         `msgpack:"format"`
	ContentType   string         `msgpack:"content_type"`
	SizeBytes     int64          `msgpack:"size_bytes"`
	SHA256        string         `msgpack:"sha256"`
	RequestID     string         `msgpack:"request_id"`
	WatermarkID   string         `msgpack:"watermark_id"`
	BlobKey       string         `msgpack:"blob_key"`
	Filename      string         `msgpack:"filename"`
	CreatedAt     time.Time      `msgpack:"created_at"`
	UpdatedAt     time.Time      `msgpack:"updated_at"`
	FileExpiresAt time.Time      `msgpack:"file_expires_at"`
	Metadata      map[string]any `msgpack:"metadata"`
	// Media is the pixel size, pages, frames and duration of the file, where they apply (added after the
	// first records were written: zero on those).
	Media     jobstate.MediaInfo `msgpack:"media,omitempty"`
	DeletedAt *time.Time         `msgpack:"deleted_at,omitempty"`
	// StorageDestinationID is the customer storage destination the job delivered this output to (watermarked
	// assets of jobs that named one); the delivery's state lives in its storage/delivery record.
	StorageDestinationID string `msgpack:"storage_destination_id,omitempty"`
	// StorageDeliveryID is the delivery of a result moved to a destination after its job ("move to my
	// storage"); empty for a job's own delivery, whose id derives from the request id (DeliveryID).
	StorageDeliveryID string `msgpack:"storage_delivery_id,omitempty"`
	// StagingDeletedAt is when the hosted copy was removed because the delivery stored the file in the
	// customer's bucket (EndStaging); FileExpiresAt is zero from then on: the bucket's policy keeps the file.
	StagingDeletedAt *time.Time `msgpack:"staging_deleted_at,omitempty"`
}

// DeliveryID is the storage delivery the asset's file belongs to: a move's, else its job's own when the job
// named a destination; empty when the file has no destination.
func (as *Asset) DeliveryID() string {
	switch {
	case as.StorageDeliveryID != "":
		return as.StorageDeliveryID
	case as.StorageDestinationID != "":
		return jobstate.StorageDeliveryIDFor(as.RequestID)
	}
	return ""
}

// SchemaVersion is the layout version of stored assets.
func (*Asset) SchemaVersion() uint16 { return 1 }

// AssetIDFor derives the id of a job's source or watermarked asset from the request id, so that a job
// re-applying its outcome after a crash writes the very same records (package assetid owns the form).
func AssetIDFor(requestID, kind string) string { return assetid.For(requestID, kind) }

// PublicID is the id the API shows for the asset: the full form also for a record stored under the short id
// of earlier versions (ID stays the storage id, which the index keys name).
func (as *Asset) PublicID() string { return assetid.Canonical(as.ID, as.RequestID, as.Kind) }

// PublicParentID is ParentAssetID as the API shows it (see PublicID).
func (as *Asset) PublicParentID() string {
	return assetid.Canonical(as.ParentAssetID, as.RequestID, AssetSource)
}

// Assets reads and writes asset records and their indexes. Blobs is needed only by the operations that delete
// files (Delete, DeleteMany, ExpireFiles).
type Assets struct {
	Store persistence.Store
	Blobs persistence.Blobs
	// ScanBudget bounds the index entries one List page may pass over; 0 means maxListScan. Tests lower it.
	ScanBudget int
}

func invertedTime(t time.Time) string {
	return fmt.Sprintf("%020d", uint64(math.MaxInt64-t.UnixNano()))
}

// Create writes a new asset and its indexes. It is idempotent: an asset that exists already is left as it is
// (it may have been renamed since), and missing index keys are added, unless the asset was deleted meanwhile:
// a job re-applying its outcome after a crash must not bring a deleted asset back into the listings.
func (a Assets) Create(ctx context.Context, as *Asset) error {
	b, err := persistence.Marshal(as)
	if err != nil {
		return fmt.Errorf("encode asset %s: %w", as.ID, err)
	}
	if _, err := a.Store.CompareAndSet(ctx, []byte(prefixAsset+as.ID), persistence.NoVersion, b); err != nil {
		if !errors.Is(err, persistence.ErrVersionMismatch) {
			return fmt.Errorf("write asset %s: %w", as.ID, err)
		}
		cur, _, err := a.Get(ctx, as.ID)
		if err != nil {
			return err
		}
		if cur.DeletedAt != nil {
			return nil
		}
	}
	for _, e := range indexEntries(as) {
		if _, err := a.Store.CompareAndSet(ctx, []byte(e.key), persistence.NoVersion, e.value); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
			return fmt.Errorf("index asset %s: %w", as.ID, err)
		}
	}
	return nil
}

type indexEntry struct {
	key   string
	value []byte
}

// indexEntries are the index keys of an asset. The listing indexes carry kind and media type in their value so
// that a filtered listing skips non-matching entries without loading their records.
func indexEntries(as *Asset) []indexEntry {
	tag := []byte(as.Kind + "/" + as.MediaType)
	pos := invertedTime(as.CreatedAt) + "/" + as.ID
	out := []indexEntry{{key: prefixAssetIndex + as.OrgID + "/" + pos, value: tag}}
	if as.WatermarkID != "" {
		out = append(out,
			indexEntry{key: prefixWatermarks + as.OrgID + "/" + as.WatermarkID + "/" + as.ID},
			indexEntry{key: prefixAssetWM + as.OrgID + "/" + as.WatermarkID + "/" + pos, value: tag})
	}
	if !as.FileExpiresAt.IsZero() {
		out = append(out, indexEntry{key: expiryKey(as.FileExpiresAt, as.ID)})
	}
	return out
}

func expiryKey(at time.Time, id string) string {
	return fmt.Sprintf("%s%020d/%s", prefixAssetExpiry, max(at.Unix(), 0), id)
}

// Get returns the asset with id, or persistence.ErrNotFound. A full id whose asset was stored under the short
// id of earlier versions finds that record (its ID is the short storage id).
func (a Assets) Get(ctx context.Context, id string) (*Asset, persistence.Version, error) {
	as, v, err := a.get(ctx, id)
	if legacy := assetid.Legacy(id); legacy != id && errors.Is(err, persistence.ErrNotFound) {
		old, oldV, oldErr := a.get(ctx, legacy)
		switch {
		case oldErr == nil && old.PublicID() == id:
			return old, oldV, nil
		case oldErr != nil && !errors.Is(oldErr, persistence.ErrNotFound):
			return nil, "", oldErr
		}
	}
	return as, v, err
}

// get reads the record stored under id.
func (a Assets) get(ctx context.Context, id string) (*Asset, persistence.Version, error) {
	it, err := a.Store.Get(ctx, []byte(prefixAsset+id))
	if err != nil {
		return nil, "", fmt.Errorf("load asset %s: %w", id, err)
	}
	var as Asset
	if err := persistence.Unmarshal(it.Value, &as); err != nil {
		return nil, "", fmt.Errorf("decode asset %s: %w", id, err)
	}
	return &as, it.Version, nil
}

// IssuedWatermarks returns up to limit distinct watermark ids the organization's embeds produced, for
// snapping a damaged detection to a known id.
func (a Assets) IssuedWatermarks(ctx context.Context, orgID string, limit int) ([]string, error) {
	prefix := []byte(prefixWatermarks + orgID + "/")
	var out []string
	start := prefix
	for len(out) < limit {
		items, err := a.Store.Scan(ctx, prefix, start, 500)
		if err != nil {
			return nil, fmt.Errorf("list watermarks of %s: %w", orgID, err)
		}
		for _, it := range items {
			// <watermark_id>/<asset_id>, the asset id full or short.
			wm := string(it.Key[len(prefix):])
			if i := strings.LastIndexByte(wm, '/'); i > 0 {
				wm = wm[:i]
			}
			if len(out) == 0 || out[len(out)-1] != wm {
				out = append(out, wm)
			}
		}
		if len(items) < 500 {
			break
		}
		start = persistence.KeyAfter(items[len(items)-1].Key)
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
