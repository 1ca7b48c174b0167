package actors_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/persistence"
	"filigrane/persistence/fsblobs"
)

var assetEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newAssets(t *testing.T) actors.Assets {
	t.Helper()
	store := tempStore(t)
	blobs, err := fsblobs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return actors.Assets{Store: store, Blobs: blobs}
}

// putAsset stores a file and creates its asset record, created at epoch + i seconds.
func putAsset(t *testing.T, a actors.Assets, org string, i int, kind, media, wm string, retention time.Duration) *actors.Asset {
	t.Helper()
	ctx := context.Background()
	id := actors.AssetIDFor(fmt.Sprintf("req_%s_%d", org, i), kind)
	key := "assets/" + id
	info, err := a.Blobs.Put(ctx, key, strings.NewReader("file "+id))
	if err != nil {
		t.Fatal(err)
	}
	at := assetEpoch.Add(time.Duration(i) * time.Second)
	as := &actors.Asset{ID: id, OrgID: org, Name: "n" + id, Version: 1, Kind: kind, MediaType: media, WatermarkID: wm,
		BlobKey: key, SizeBytes: info.Size, SHA256: info.SHA256, CreatedAt: at, UpdatedAt: at, FileExpiresAt: at.Add(retention)}
	if err := a.Create(ctx, as); err != nil {
		t.Fatal(err)
	}
	return as
}

// listAll pages through a listing and returns the ids in order.
func listAll(t *testing.T, a actors.Assets, org string, f actors.AssetFilter, limit int) []string {
	t.Helper()
	var ids []string
	after := ""
	for pages := 0; ; pages++ {
		page, err := a.List(context.Background(), org, f, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Assets) > limit || pages > 1000 {
			t.Fatalf("page of %d for limit %d", len(page.Assets), limit)
		}
		for _, as := range page.Assets {
			ids = append(ids, as.ID)
		}
		if page.Next == "" {
			return ids
		}
		if !actors.ValidListPosition(page.Next) {
			t.Fatalf("next position %q", page.Next)
		}
		after = page.Next
	}
}

func TestAssetListOrderFiltersAndScanBudget(t *testing.T) {
	a := newAssets(t)
	const wm = "aa00000000000000000000000000000000000000000000000000000000000000"
	var all, videos, marked []string
	for i := 0; i < 40; i++ {
		media, kind, w := "image", actors.AssetSource, ""
		if i%10 == 3 {
			media = "video"
		}
		if i%2 == 1 {
			kind, w = actors.AssetWatermarked, wm
		}
		as := putAsset(t, a, "org_x", i, kind, media, w, time.Hour)
		all = append([]string{as.ID}, all...)
		if media == "video" {
			videos = append([]string{as.ID}, videos...)
		}
		if kind == actors.AssetWatermarked {
			marked = append([]string{as.ID}, marked...)
		}
	}
	putAsset(t, a, "org_y", 100, actors.AssetWatermarked, "video", wm, time.Hour)

	join := func(ids []string) string { return strings.Join(ids, ",") }
	for _, limit := range []int{1, 7, 40, 100} {
		if got := listAll(t, a, "org_x", actors.AssetFilter{}, limit); join(got) != join(all) {
			t.Fatalf("limit %d: %v", limit, got)
		}
	}
	if got := listAll(t, a, "org_x", actors.AssetFilter{MediaType: "video"}, 2); join(got) != join(videos) {
		t.Fatalf("videos: %v, want %v", got, videos)
	}
	if got := listAll(t, a, "org_x", actors.AssetFilter{WatermarkID: wm}, 3); join(got) != join(marked) {
		t.Fatalf("watermark: %v", got)
	}
	if got := listAll(t, a, "org_x", actors.AssetFilter{WatermarkID: wm, Kind: actors.AssetSource}, 3); len(got) != 0 {
		t.Fatalf("sources of a watermark: %v", got)
	}
	// With a tiny scan budget a rare filter comes back in short (even empty) pages, and still completely.
	small := a
	small.ScanBudget = 3
	if got := listAll(t, small, "org_x", actors.AssetFilter{MediaType: "video"}, 2); join(got) != join(videos) {
		t.Fatalf("videos with a small budget: %v, want %v", got, videos)
	}
	if got := listAll(t, small, "org_x", actors.AssetFilter{}, 5); join(got) != join(all) {
		t.Fatalf("all with a small budget: %v", got)
	}
}

func TestAssetPatchCompareAndSetRace(t *testing.T) {
	a := newAssets(t)
	as := putAsset(t, a, "org_x", 1, actors.AssetSource, "image", "", time.Hour)
	const n = 16
	var wg sync.WaitGroup
	results := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			name := fmt.Sprint("writer ", i)
			_, results[i] = a.Patch(context.Background(), "org_x", as.ID, actors.AssetPatch{Version: 1, Name: &name}, assetEpoch.Add(time.Minute))
		}(i)
	}
	wg.Wait()
	won := 0
	for i, err := range results {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, actors.ErrAssetVersionConflict):
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	got, _, err := a.Lookup(context.Background(), "org_x", as.ID)
	if won != 1 || err != nil || got.Version != 2 || !strings.HasPrefix(got.Name, "writer ") {
		t.Fatalf("%d won; asset %+v %v", won, got, err)
	}
	if _, err := a.Patch(context.Background(), "org_y", as.ID, actors.AssetPatch{Version: 2, SetMetadata: true}, assetEpoch); !errors.Is(err, actors.ErrAssetNotFound) {
		t.Fatalf("other organization's patch: %v", err)
	}
}

func TestAssetDeleteIsFinalAndRepeatable(t *testing.T) {
	a := newAssets(t)
	ctx := context.Background()
	as := putAsset(t, a, "org_x", 1, actors.AssetWatermarked, "image", "bb00000000000000000000000000000000000000000000000000000000000000", time.Hour)
	meta := "kept?"
	if _, err := a.Patch(ctx, "org_x", as.ID, actors.AssetPatch{Version: 1, Name: &meta, SetMetadata: true, Metadata: map[string]any{"k": "v"}}, assetEpoch); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, "org_y", as.ID, assetEpoch); !errors.Is(err, actors.ErrAssetNotFound) {
		t.Fatalf("other organization deletes: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := a.Delete(ctx, "org_x", as.ID, assetEpoch); err != nil {
			t.Fatalf("delete %d: %v", i, err)
		}
	}
	// A job re-applying its outcome after a crash must not bring the asset back.
	if err := a.Create(ctx, as); err != nil {
		t.Fatal(err)
	}
	if ids := listAll(t, a, "org_x", actors.AssetFilter{}, 10); len(ids) != 0 {
		t.Fatalf("deleted asset listed: %v", ids)
	}
	if _, _, err := a.Lookup(ctx, "org_x", as.ID); !errors.Is(err, actors.ErrAssetNotFound) {
		t.Fatalf("lookup of deleted: %v", err)
	}
	rec, _, err := a.Get(ctx, as.ID)
	if err != nil || rec.DeletedAt == nil || rec.Name != "" || rec.Metadata != nil {
		t.Fatalf("deleted record %+v %v", rec, err)
	}
	if _, err := a.Blobs.Stat(ctx, as.BlobKey); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("file of deleted asset: %v", err)
	}
	if n, err := a.ExpireFiles(ctx, assetEpoch.Add(2*time.Hour)); err != nil || n != 0 {
		t.Fatalf("expiry of a deleted asset: %d %v", n, err)
	}
}

func TestAssetDeleteManyAllOrNothing(t *testing.T) {
	a := newAssets(t)
	ctx := context.Background()
	x1 := putAsset(t, a, "org_x", 1, actors.AssetSource, "image", "", time.Hour)
	x2 := putAsset(t, a, "org_x", 2, actors.AssetSource, "image", "", time.Hour)
	y := putAsset(t, a, "org_y", 3, actors.AssetSource, "image", "", time.Hour)
	for _, ids := range [][]string{{x1.ID, y.ID}, {x1.ID, "ast_00000000000000000000000000000000"}, {x2.ID, "junk"}} {
		var missing *actors.MissingAssetError
		if err := a.DeleteMany(ctx, "org_x", ids, assetEpoch); !errors.As(err, &missing) || missing.ID != ids[1] {
			t.Fatalf("%v: %v", ids, err)
		}
	}
	if ids := listAll(t, a, "org_x", actors.AssetFilter{}, 10); len(ids) != 2 {
		t.Fatalf("refused bulk delete deleted: %v", ids)
	}
	if err := a.DeleteMany(ctx, "org_x", []string{x1.ID, x2.ID}, assetEpoch); err != nil {
		t.Fatal(err)
	}
	if ids := listAll(t, a, "org_x", actors.AssetFilter{}, 10); len(ids) != 0 {
		t.Fatalf("left after bulk delete: %v", ids)
	}
	if ids := listAll(t, a, "org_y", actors.AssetFilter{}, 10); len(ids) != 1 {
		t.Fatalf("other organization: %v", ids)
	}
}

func TestAssetExpireFiles(t *testing.T) {
	a := newAssets(t)
	ctx := context.Background()
	short := putAsset(t, a, "org_x", 0, actors.AssetSource, "image", "", 30*24*time.Hour)
	long := putAsset(t, a, "org_x", 0, actors.AssetWatermarked, "image", "cc00000000000000000000000000000000000000000000000000000000000000", 365*24*time.Hour)
	exists := func(as *actors.Asset) bool {
		_, err := a.Blobs.Stat(ctx, as.BlobKey)
		return err == nil
	}
	end := short.FileExpiresAt
	// Half a second before the end, in the same second as the expiry entry: not yet.
	if n, err := a.ExpireFiles(ctx, end.Add(-500*time.Millisecond)); err != nil || n != 0 || !exists(short) {
		t.Fatalf("before the end: %d %v", n, err)
	}
	if n, err := a.ExpireFiles(ctx, end); err != nil || n != 1 || exists(short) || !exists(long) {
		t.Fatalf("at the end: %d %v", n, err)
	}
	if n, err := a.ExpireFiles(ctx, end.Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("again: %d %v", n, err)
	}
	rec, _, err := a.Lookup(ctx, "org_x", short.ID)
	if err != nil || rec.FileAvailable(end) || !rec.FileAvailable(end.Add(-time.Second)) {
		t.Fatalf("record after expiry: %+v %v", rec, err)
	}
	if n, err := a.ExpireFiles(ctx, long.FileExpiresAt); err != nil || n != 1 || exists(long) {
		t.Fatalf("after a year: %d %v", n, err)
	}

	// An expiry inside a second: a pass within that second but before the instant keeps the entry for later.
	odd := putAsset(t, a, "org_x", 7, actors.AssetSource, "image", "", time.Hour+600*time.Millisecond)
	at := odd.FileExpiresAt
	if n, err := a.ExpireFiles(ctx, at.Add(-300*time.Millisecond)); err != nil || n != 0 || !exists(odd) {
		t.Fatalf("within the second, before the instant: %d %v", n, err)
	}
	if n, err := a.ExpireFiles(ctx, at.Add(300*time.Millisecond)); err != nil || n != 1 || exists(odd) {
		t.Fatalf("after the instant: %d %v", n, err)
	}
}

// TestAssetClaimAndEndStaging: a result is claimed by one delivery (the same again is a no-op, another is
// ErrAssetHasDestination, a deleted asset ErrAssetNotFound); ending its staging for another delivery changes
// nothing, for its own clears the file expiry, sets staging_deleted_at, removes the file and the expiry entry
// and repeating it (a re-run after a crash) is harmless.
func TestAssetClaimAndEndStaging(t *testing.T) {
	a := newAssets(t)
	ctx := context.Background()
	as := putAsset(t, a, "org_x", 0, actors.AssetWatermarked, "image", "cc00000000000000000000000000000000000000000000000000000000000000", 30*24*time.Hour)
	exists := func() bool {
		_, err := a.Blobs.Stat(ctx, as.BlobKey)
		return err == nil
	}
	if _, err := a.ClaimDelivery(ctx, "org_y", as.ID, "dst_1", "std_a"); !errors.Is(err, actors.ErrAssetNotFound) {
		t.Fatalf("claim by another organization: %v", err)
	}
	if got, err := a.EndStaging(ctx, as.ID, "std_a", assetEpoch); err != nil || got != nil || !exists() {
		t.Fatalf("end staging of an unclaimed asset: %v %v", got, err)
	}
	got, err := a.ClaimDelivery(ctx, "org_x", as.ID, "dst_1", "std_a")
	if err != nil || got.DeliveryID() != "std_a" || got.StorageDestinationID != "dst_1" || got.Version != 1 {
		t.Fatalf("claim: %+v %v", got, err)
	}
	if _, err := a.ClaimDelivery(ctx, "org_x", as.ID, "dst_1", "std_a"); err != nil {
		t.Fatalf("the same claim again: %v", err)
	}
	if _, err := a.ClaimDelivery(ctx, "org_x", as.ID, "dst_2", "std_b"); !errors.Is(err, actors.ErrAssetHasDestination) {
		t.Fatalf("a second claim: %v", err)
	}
	if got, err := a.EndStaging(ctx, as.ID, "std_b", assetEpoch); err != nil || got != nil || !exists() {
		t.Fatalf("end staging for another delivery: %v %v", got, err)
	}
	at := assetEpoch.Add(time.Hour)
	for range 2 {
		got, err := a.EndStaging(ctx, as.ID, "std_a", at)
		if err != nil || got == nil || exists() || !got.FileExpiresAt.IsZero() || got.StagingDeletedAt == nil || !got.StagingDeletedAt.Equal(at) {
			t.Fatalf("end staging: %+v %v", got, err)
		}
	}
	rec, _, err := a.Lookup(ctx, "org_x", as.ID)
	if err != nil || !rec.Stored() || rec.FileAvailable(at) {
		t.Fatalf("record after the staging ended: %+v %v", rec, err)
	}
	if left, err := a.Store.Scan(ctx, []byte("assetexp/"), []byte("assetexp/"), 10); err != nil || len(left) != 0 {
		t.Fatalf("expiry entries after the staging ended: %d %v", len(left), err)
	}
	if err := a.Delete(ctx, "org_x", as.ID, at); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ClaimDelivery(ctx, "org_x", as.ID, "dst_1", "std_a"); !errors.Is(err, actors.ErrAssetNotFound) {
		t.Fatalf("claim of a deleted asset: %v", err)
	}
}
