package actors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"filigrane/actors/assetid"
	"filigrane/actors/durable"
	"filigrane/persistence"
)

// Errors of the asset library operations. Both wrap nothing: the edge maps them to 404 and 409.
var (
	// ErrAssetNotFound: the asset does not exist, belongs to another organization or was deleted.
	ErrAssetNotFound = errors.New("asset not found")
	// ErrAssetVersionConflict: the edit named a version that is no longer the asset's current one.
	ErrAssetVersionConflict = errors.New("asset version conflict")
)

// ValidAssetID reports whether id has the form of an asset id ("ast_" + 64 lowercase hex, or the 32 of earlier
// versions), so that garbage in a path never reaches the store.
func ValidAssetID(id string) bool { return assetid.Valid(id) }

// storedID is the id the record of asset id is stored under (id itself, or the short id of earlier versions
// that a full id names), or ErrAssetNotFound.
func (a Assets) storedID(ctx context.Context, id string) (string, error) {
	if !ValidAssetID(id) {
		return "", ErrAssetNotFound
	}
	as, _, err := a.Get(ctx, id)
	if errors.Is(err, persistence.ErrNotFound) {
		return "", ErrAssetNotFound
	}
	if err != nil {
		return "", err
	}
	return as.ID, nil
}

// FileAvailable reports whether the asset's hosted file can still be downloaded here at now: not once its
// staging ended (the file is then in the customer's bucket, Stored).
func (as *Asset) FileAvailable(now time.Time) bool {
	return as.DeletedAt == nil && as.BlobKey != "" && as.StagingDeletedAt == nil &&
		(as.FileExpiresAt.IsZero() || now.Before(as.FileExpiresAt))
}

// Stored reports whether the asset's file lives in a customer's bucket instead of here: its delivery stored
// it and the hosted copy was removed (EndStaging).
func (as *Asset) Stored() bool { return as.DeletedAt == nil && as.StagingDeletedAt != nil }

// ErrAssetHasDestination: the result already belongs to another storage delivery (a result has one
// destination and key).
var ErrAssetHasDestination = errors.New("the result already has a storage destination")

// ClaimDelivery makes delivery deliveryID to destinationID the destination of a live watermarked asset of
// orgID whose file has none yet (a move of an earlier result). Claiming it again for the same delivery is a
// no-op; an asset of another delivery is ErrAssetHasDestination, unknown, deleted and other organizations'
// ones ErrAssetNotFound. The edit version is not changed: this is no user edit.
func (a Assets) ClaimDelivery(ctx context.Context, orgID, id, destinationID, deliveryID string) (*Asset, error) {
	id, err := a.storedID(ctx, id)
	if err != nil {
		return nil, err
	}
	as, err := durable.Update(ctx, a.Store, []byte(prefixAsset+id), 0, func(cur *Asset) (*Asset, error) {
		switch {
		case cur == nil || cur.OrgID != orgID || cur.DeletedAt != nil:
			return nil, ErrAssetNotFound
		case cur.DeliveryID() == deliveryID:
			return nil, nil
		case cur.DeliveryID() != "":
			return nil, ErrAssetHasDestination
		}
		next := *cur
		next.StorageDestinationID, next.StorageDeliveryID = destinationID, deliveryID
		return &next, nil
	})
	if err != nil && !errors.Is(err, ErrAssetNotFound) && !errors.Is(err, ErrAssetHasDestination) {
		return nil, fmt.Errorf("claim asset %s for delivery %s: %w", id, deliveryID, err)
	}
	return as, err
}

// EndStaging removes the hosted copy of an asset whose delivery deliveryID stored the file in the customer's
// bucket: the record first (StagingDeletedAt set, FileExpiresAt cleared: the bucket's policy keeps the file
// now), then the file and its expiry entry. The job's result is the same file, so it goes too. Repeating it
// repeats only the removals, so a crash between the steps is finished by the next call. An asset that is
// deleted, gone, or whose file belongs to another delivery is left alone (nil, nil).
func (a Assets) EndStaging(ctx context.Context, id, deliveryID string, now time.Time) (*Asset, error) {
	var expiry time.Time
	as, err := durable.Update(ctx, a.Store, []byte(prefixAsset+id), 0, func(cur *Asset) (*Asset, error) {
		switch {
		case cur == nil || cur.DeletedAt != nil || cur.DeliveryID() != deliveryID:
			return nil, errNoStaging
		case cur.StagingDeletedAt != nil:
			return nil, nil
		}
		next := *cur
		stamp := now
		expiry, next.StagingDeletedAt, next.FileExpiresAt = cur.FileExpiresAt, &stamp, time.Time{}
		return &next, nil
	})
	switch {
	case errors.Is(err, errNoStaging):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("end staging of asset %s: %w", id, err)
	}
	if as.BlobKey != "" {
		if err := a.Blobs.Delete(ctx, as.BlobKey); err != nil {
			return nil, fmt.Errorf("delete staged file of asset %s: %w", id, err)
		}
	}
	if !expiry.IsZero() { // on a repeat the entry is left to the expiry pass, which drops stale entries
		if err := deleteKey(ctx, a.Store, []byte(expiryKey(expiry, as.ID))); err != nil {
			return nil, fmt.Errorf("drop expiry entry of asset %s: %w", id, err)
		}
	}
	return as, nil
}

// errNoStaging: EndStaging found nothing of the delivery's to remove.
var errNoStaging = errors.New("no staged file of this delivery")

// Lookup returns a live asset of orgID. Deleted assets and other organizations' assets are ErrAssetNotFound,
// exactly like unknown ids, so that a caller learns nothing about ids it does not own.
func (a Assets) Lookup(ctx context.Context, orgID, id string) (*Asset, persistence.Version, error) {
	if !ValidAssetID(id) {
		return nil, "", ErrAssetNotFound
	}
	as, v, err := a.Get(ctx, id)
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, "", ErrAssetNotFound
	}
	if err != nil {
		return nil, "", err
	}
	if as.OrgID != orgID || as.DeletedAt != nil {
		return nil, "", ErrAssetNotFound
	}
	return as, v, nil
}

// AssetFilter narrows a listing; empty fields match everything.
type AssetFilter struct {
	Kind        string // AssetSource or AssetWatermarked
	MediaType   string // image, document or video
	WatermarkID string // lowercase hex
}

func (f AssetFilter) matchTag(tag []byte) bool {
	kind, media, _ := bytes.Cut(tag, []byte("/"))
	return (f.Kind == "" || string(kind) == f.Kind) && (f.MediaType == "" || string(media) == f.MediaType)
}

func (f AssetFilter) match(as *Asset) bool {
	return (f.Kind == "" || as.Kind == f.Kind) && (f.MediaType == "" || as.MediaType == f.MediaType) &&
		(f.WatermarkID == "" || as.WatermarkID == f.WatermarkID)
}

// AssetPage is one page of a listing. Next is the position to continue after ("" at the end); it is a plain
// index position, the edge wraps it into an opaque cursor bound to the organization and filters.
type AssetPage struct {
	Assets []*Asset
	Next   string
}

// maxListScan bounds how many index entries one page may skip over, so that a filter matching little of a
// large library answers in bounded time; the page then comes back short (even empty) with a Next position.
const maxListScan = 20_000

// ValidListPosition reports whether pos has the form of a listing position: "<20 digits>/<asset id>".
func ValidListPosition(pos string) bool {
	digits, id, ok := strings.Cut(pos, "/")
	if !ok || len(digits) != 20 || !ValidAssetID(id) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// List returns up to limit live assets of orgID matching f, newest first, starting after position after ("":
// from the newest). It reads the assetidx index, or assetwm when the filter names a watermark id.
func (a Assets) List(ctx context.Context, orgID string, f AssetFilter, after string, limit int) (AssetPage, error) {
	if limit < 1 {
		return AssetPage{}, fmt.Errorf("list assets: limit %d", limit)
	}
	prefix := prefixAssetIndex + orgID + "/"
	if f.WatermarkID != "" {
		prefix = prefixAssetWM + orgID + "/" + f.WatermarkID + "/"
	}
	start := []byte(prefix)
	if after != "" {
		start = persistence.KeyAfter([]byte(prefix + after))
	}
	budget := a.ScanBudget
	if budget <= 0 {
		budget = maxListScan
	}
	var page AssetPage
	var positions []string
	scanned := 0
	const batch = 256
	for {
		items, err := a.Store.Scan(ctx, []byte(prefix), start, batch)
		if err != nil {
			return AssetPage{}, fmt.Errorf("list assets of %s: %w", orgID, err)
		}
		for _, it := range items {
			pos := string(it.Key[len(prefix):])
			scanned++
			if len(it.Value) > 0 && !f.matchTag(it.Value) {
				if scanned >= budget {
					return a.cut(page, positions, limit, pos), nil
				}
				continue
			}
			_, id, _ := strings.Cut(pos, "/")
			as, _, err := a.Get(ctx, id)
			switch {
			case errors.Is(err, persistence.ErrNotFound):
				// An index entry whose record is gone: skip it, a listing never fails on a stale entry.
			case err != nil:
				return AssetPage{}, err
			case as.OrgID == orgID && as.DeletedAt == nil && f.match(as):
				page.Assets = append(page.Assets, as)
				positions = append(positions, pos)
				if len(page.Assets) > limit {
					return a.cut(page, positions, limit, ""), nil
				}
			}
			if scanned >= budget {
				return a.cut(page, positions, limit, pos), nil
			}
		}
		if len(items) < batch {
			return a.cut(page, positions, limit, ""), nil
		}
		start = persistence.KeyAfter(items[len(items)-1].Key)
	}
}

// cut trims a page to limit. One asset past the limit means there is more: Next is the last one returned.
// Without it, Next is scanStop: where a scan that ran out of budget stopped, or "" at the end of the index.
func (Assets) cut(page AssetPage, positions []string, limit int, scanStop string) AssetPage {
	if len(page.Assets) > limit {
		page.Assets = page.Assets[:limit]
		page.Next = positions[limit-1]
		return page
	}
	page.Next = scanStop
	return page
}

// AssetPatch is a validated edit. Metadata replaces the whole object when SetMetadata is true.
type AssetPatch struct {
	Version     int64
	Name        *string
	SetMetadata bool
	Metadata    map[string]any
}

// Patch applies p to a live asset of orgID if p.Version is its current version, with compare-and-set on the
// record: of concurrent edits naming the same version exactly one wins, the others get ErrAssetVersionConflict.
func (a Assets) Patch(ctx context.Context, orgID, id string, p AssetPatch, now time.Time) (*Asset, error) {
	id, err := a.storedID(ctx, id)
	if err != nil {
		return nil, err
	}
	// A compare-and-set can also fail because of a write that did not change the edit version (none today,
	// but a future background marker must not turn into spurious conflicts), so a mismatch re-reads and
	// re-decides; the bound only guards against a livelock.
	as, err := durable.Update(ctx, a.Store, []byte(prefixAsset+id), 5, func(cur *Asset) (*Asset, error) {
		if cur == nil || cur.OrgID != orgID || cur.DeletedAt != nil {
			return nil, ErrAssetNotFound
		}
		if cur.Version != p.Version {
			return nil, ErrAssetVersionConflict
		}
		next := *cur
		if p.Name != nil {
			next.Name = *p.Name
		}
		if p.SetMetadata {
			next.Metadata = p.Metadata
		}
		next.Version++
		next.UpdatedAt = now
		return &next, nil
	})
	switch {
	case errors.Is(err, ErrAssetNotFound), errors.Is(err, ErrAssetVersionConflict):
		return nil, err
	case errors.Is(err, persistence.ErrVersionMismatch):
		return nil, ErrAssetVersionConflict
	case err != nil:
		return nil, fmt.Errorf("asset %s: %w", id, err)
	}
	return as, nil
}

// Delete deletes an asset of orgID: the record is marked deleted with its name and metadata cleared (the
// commit point: reads stop from here), then its file and listing index entries go. Deleting an asset that is
// already deleted repeats the cleanup and succeeds, so a delete interrupted after its commit point is finished
// by the retry. Unknown and other organizations' assets are ErrAssetNotFound.
func (a Assets) Delete(ctx context.Context, orgID, id string, now time.Time) error {
	id, err := a.storedID(ctx, id)
	if err != nil {
		return err
	}
	// An edit landing in between makes the compare-and-set retry: deleting wins over it.
	as, err := durable.Update(ctx, a.Store, []byte(prefixAsset+id), 6, func(cur *Asset) (*Asset, error) {
		if cur == nil || cur.OrgID != orgID {
			return nil, ErrAssetNotFound
		}
		if cur.DeletedAt != nil {
			return nil, nil // deleted already: repeat the cleanup only
		}
		next := *cur
		stamp := now
		next.DeletedAt = &stamp
		next.Name = ""
		next.Metadata = nil
		next.UpdatedAt = now
		return &next, nil
	})
	if errors.Is(err, ErrAssetNotFound) {
		return err
	}
	if err != nil {
		return fmt.Errorf("mark asset %s deleted: %w", id, err)
	}
	return a.dropFiles(ctx, as)
}

// dropFiles removes a deleted asset's file and its index entries. The wmidx entry stays: it records that the
// organization issued the watermark id, and detection keeps snapping damaged copies to it, since copies of
// the file stay in the world after the record is gone.
func (a Assets) dropFiles(ctx context.Context, as *Asset) error {
	if as.BlobKey != "" {
		if err := a.Blobs.Delete(ctx, as.BlobKey); err != nil {
			return fmt.Errorf("delete file of asset %s: %w", as.ID, err)
		}
	}
	for _, e := range indexEntries(as) {
		if strings.HasPrefix(e.key, prefixWatermarks) {
			continue
		}
		if err := deleteKey(ctx, a.Store, []byte(e.key)); err != nil {
			return fmt.Errorf("unindex asset %s: %w", as.ID, err)
		}
	}
	return nil
}

// deleteKey removes key whatever its version; a key that is already gone is fine.
func deleteKey(ctx context.Context, st persistence.Store, key []byte) error {
	it, err := st.Get(ctx, key)
	if errors.Is(err, persistence.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := st.Delete(ctx, key, it.Version); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
		return err
	}
	return nil
}

// MissingAssetError names the first id of a bulk delete that is unknown or another organization's.
type MissingAssetError struct{ ID string }

func (e *MissingAssetError) Error() string { return "asset " + e.ID + " not found" }

// Unwrap lets callers test for ErrAssetNotFound.
func (e *MissingAssetError) Unwrap() error { return ErrAssetNotFound }

// DeleteMany deletes every asset in ids, or none when one of them is unknown or another organization's
// (*MissingAssetError): all ids are checked before the first deletion. Already deleted assets of orgID count
// as present, as a repeated single delete does. There is no multi-key transaction on object storage, so a
// storage failure part way leaves some deleted; each deletion is idempotent and a retry of the same request
// completes it.
func (a Assets) DeleteMany(ctx context.Context, orgID string, ids []string, now time.Time) error {
	for _, id := range ids {
		if !ValidAssetID(id) {
			return &MissingAssetError{ID: id}
		}
		as, _, err := a.Get(ctx, id)
		if errors.Is(err, persistence.ErrNotFound) || err == nil && as.OrgID != orgID {
			return &MissingAssetError{ID: id}
		}
		if err != nil {
			return err
		}
	}
	for _, id := range ids {
		if err := a.Delete(ctx, orgID, id, now); err != nil {
			return err
		}
	}
	return nil
}

// ExpireFiles deletes the hosted files whose retention ended at or before now (the records stay; their
// file_available turns false with the clock already) and drops their expiry entries. It reports how many
// files it deleted.
func (a Assets) ExpireFiles(ctx context.Context, now time.Time) (int, error) {
	end := fmt.Sprintf("%s%020d/", prefixAssetExpiry, now.Unix()+1)
	deleted := 0
	err := scanAll(ctx, a.Store, []byte(prefixAssetExpiry), func(it persistence.Item) error {
		if string(it.Key) >= end {
			return errStopScan
		}
		id := string(it.Key[len(prefixAssetExpiry)+21:])
		as, _, err := a.Get(ctx, id)
		switch {
		case errors.Is(err, persistence.ErrNotFound):
		case err != nil:
			return err
		case as.DeletedAt == nil && !as.FileExpiresAt.IsZero() && !now.Before(as.FileExpiresAt):
			if err := a.Blobs.Delete(ctx, as.BlobKey); err != nil {
				return fmt.Errorf("delete expired file of asset %s: %w", id, err)
			}
			deleted++
		case as.DeletedAt == nil && expiryKey(as.FileExpiresAt, id) == string(it.Key):
			// Within the second the entry names but not yet past the instant: the next pass takes it.
			return nil
		}
		if err := a.Store.Delete(ctx, it.Key, it.Version); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
			return fmt.Errorf("drop expiry entry of asset %s: %w", id, err)
		}
		return nil
	})
	if errors.Is(err, errStopScan) {
		err = nil
	}
	return deleted, err
}
