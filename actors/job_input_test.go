package actors_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/actors/outbox"
	"filigrane/persistence"
)

// TestInputCheckDeletesFilesNoJobReads: a request that stored its file and could neither submit its job nor
// ask whether the job exists keeps the file and hands the outbox a check (actors.OutboxJobInput). The check
// deletes nothing at once (the submission may still reach its job); ten minutes later it deletes the file no
// job was created for, and the file a replayed job does not read, and keeps the file its job reads.
func TestInputCheckDeletesFilesNoJobReads(t *testing.T) {
	ctx := context.Background()
	files := newAssets(t) // a store and a blob store under t.TempDir()
	store, blobs := files.Store, files.Blobs
	clk, org, spec := submitFixture(t, store, "a")
	sys, c := startSystem(t, store, store, clk)
	t.Cleanup(sys.Shutdown)
	c.job(t, spec.RequestID, &actors.JobSubmit{Spec: spec, Hold: 3, Slot: true})

	orphanReq := "req_" + strings.Repeat("9", 64)
	inputs := map[string]struct {
		reqID, key string
		kept       bool
	}{
		"its job reads it":              {spec.RequestID, spec.Input.BlobKey, true},
		"no job was created":            {orphanReq, "in/" + orphanReq, false},
		"the replayed job's is another": {spec.RequestID, "in/" + spec.RequestID + "-retry", false},
	}
	ob := outbox.Outbox{Store: store, Clock: clk}
	reg := outbox.NewRegistry()
	reg.MustRegister(actors.OutboxJobInput, actors.InputCheckHandler(c, blobs))
	pass := outbox.Deliverer{Outbox: ob, Registry: reg, Logger: zerolog.Nop()}
	for _, f := range inputs {
		if _, err := blobs.Put(ctx, f.key, strings.NewReader("pixels")); err != nil {
			t.Fatal(err)
		}
		e, err := actors.InputCheck(org.ID, f.reqID, f.key, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := ob.Add(ctx, e, e); err != nil { // handed over twice: one check
			t.Fatal(err)
		}
	}
	present := func(key string) bool {
		_, err := blobs.Stat(ctx, key)
		if err != nil && !errors.Is(err, persistence.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	if _, err := pass.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	for name, f := range inputs {
		if !present(f.key) {
			t.Fatalf("%s: the file was deleted by the first check, while its submission may still be in flight", name)
		}
	}
	clk.Advance(actors.InputCheckSchedule[0])
	res, err := pass.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Delivered != len(inputs) {
		t.Fatalf("second pass: %+v, want %d checks delivered", res, len(inputs))
	}
	for name, f := range inputs {
		if present(f.key) != f.kept {
			t.Fatalf("%s: file present %v, want %v", name, present(f.key), f.kept)
		}
	}
}
