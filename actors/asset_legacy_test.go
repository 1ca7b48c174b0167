package actors_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/actors/assetid"
)

// putLegacyAsset stores an asset the way earlier versions did: under the 32-digit id.
func putLegacyAsset(t *testing.T, a actors.Assets, org, req, kind, wm string) *actors.Asset {
	t.Helper()
	ctx := context.Background()
	id := actors.AssetIDFor(req, kind)[:assetid.LegacyLen]
	key := "assets/" + id
	info, err := a.Blobs.Put(ctx, key, strings.NewReader("old file "+id))
	if err != nil {
		t.Fatal(err)
	}
	as := &actors.Asset{ID: id, OrgID: org, Name: "old", Version: 1, Kind: kind, MediaType: "image", WatermarkID: wm,
		RequestID: req, BlobKey: key, SizeBytes: info.Size, SHA256: info.SHA256, CreatedAt: assetEpoch, UpdatedAt: assetEpoch}
	if kind == actors.AssetWatermarked {
		as.ParentAssetID = actors.AssetIDFor(req, actors.AssetSource)[:assetid.LegacyLen]
	}
	if err := a.Create(ctx, as); err != nil {
		t.Fatal(err)
	}
	return as
}

// Assets stored under the short ids of earlier versions answer to both their short and their full id, and
// show the full one.
func TestLegacyAssetIDs(t *testing.T) {
	a := newAssets(t)
	ctx := context.Background()
	wm := strings.Repeat("cd", 32)
	old := putLegacyAsset(t, a, "org_x", "req_old", actors.AssetWatermarked, wm)
	full := actors.AssetIDFor("req_old", actors.AssetWatermarked)
	if len(full) != assetid.Len || old.ID != full[:assetid.LegacyLen] {
		t.Fatalf("ids %q %q", old.ID, full)
	}
	for _, id := range []string{old.ID, full} {
		as, _, err := a.Lookup(ctx, "org_x", id)
		if err != nil {
			t.Fatalf("lookup %s: %v", id, err)
		}
		if as.PublicID() != full || as.PublicParentID() != actors.AssetIDFor("req_old", actors.AssetSource) {
			t.Fatalf("lookup %s shows %q parent %q", id, as.PublicID(), as.PublicParentID())
		}
		if _, _, err := a.Lookup(ctx, "org_y", id); !errors.Is(err, actors.ErrAssetNotFound) {
			t.Fatalf("other organization reads %s: %v", id, err)
		}
	}
	// A full id that merely starts with the short id names another asset: not this one.
	forged := old.ID + strings.Repeat("0", 32)
	if _, _, err := a.Lookup(ctx, "org_x", forged); !errors.Is(err, actors.ErrAssetNotFound) {
		t.Fatalf("forged full id: %v", err)
	}
	if err := a.Delete(ctx, "org_x", forged, assetEpoch); !errors.Is(err, actors.ErrAssetNotFound) {
		t.Fatalf("delete by forged id: %v", err)
	}
	if ids := listAll(t, a, "org_x", actors.AssetFilter{}, 1); len(ids) != 1 || ids[0] != old.ID {
		t.Fatalf("listing %v", ids)
	}
	issued, err := a.IssuedWatermarks(ctx, "org_x", 10)
	if err != nil || len(issued) != 1 || issued[0] != wm {
		t.Fatalf("issued watermarks %v %v", issued, err)
	}
	// Edits by the full id change the stored record.
	name := "renamed"
	as, err := a.Patch(ctx, "org_x", full, actors.AssetPatch{Version: 1, Name: &name}, assetEpoch.Add(time.Minute))
	if err != nil || as.Name != name || as.Version != 2 || as.ID != old.ID {
		t.Fatalf("patch %+v %v", as, err)
	}
	if got, _, err := a.Lookup(ctx, "org_x", old.ID); err != nil || got.Name != name {
		t.Fatalf("after patch by full id, short id reads %+v %v", got, err)
	}
	// So does a delete: record, file and listing go.
	if err := a.DeleteMany(ctx, "org_x", []string{full}, assetEpoch.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{old.ID, full} {
		if _, _, err := a.Lookup(ctx, "org_x", id); !errors.Is(err, actors.ErrAssetNotFound) {
			t.Fatalf("deleted asset read by %s: %v", id, err)
		}
	}
	if ids := listAll(t, a, "org_x", actors.AssetFilter{}, 10); len(ids) != 0 {
		t.Fatalf("deleted asset listed: %v", ids)
	}
	if _, err := a.Blobs.Stat(ctx, old.BlobKey); err == nil {
		t.Fatal("file of the deleted asset stays")
	}
	// New assets are minted and stored in the full form, and their short prefix names nothing.
	fresh := putAsset(t, a, "org_x", 7, actors.AssetSource, "image", "", time.Hour)
	if len(fresh.ID) != assetid.Len || fresh.PublicID() != fresh.ID {
		t.Fatalf("new id %q", fresh.ID)
	}
	if _, _, err := a.Lookup(ctx, "org_x", fresh.ID[:assetid.LegacyLen]); !errors.Is(err, actors.ErrAssetNotFound) {
		t.Fatalf("short prefix of a new id: %v", err)
	}
}
