package s3store

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/minio/minio-go/v7"

	"filigrane/persistence"
	"filigrane/persistence/s3test"
	"filigrane/persistence/storetest"
)

func TestContract(t *testing.T) {
	srv := s3test.Start(t)
	storetest.Run(t, func(t *testing.T) persistence.Store {
		s, err := New(srv.Client(), srv.NewBucket(t), "records/")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// TestNamesSortLikeKeys checks the properties ordered scans rest on: object names sort like their keys, names
// decode back to keys, a key's name starts with the name prefix of each of its prefixes, and the StartAfter
// for a start key lies between the keys below it and the keys from it on.
func TestNamesSortLikeKeys(t *testing.T) {
	s := &Store{prefix: "p/"}
	r := rand.New(rand.NewPCG(1, 2))
	var keys [][]byte
	for range 3000 {
		// Few distinct byte values and lengths around the 100-byte segment boundary, to get many shared prefixes.
		n := 1 + r.IntN(4)
		if r.IntN(3) == 0 {
			n = 98 + r.IntN(6)
		}
		k := make([]byte, n)
		for i := range k {
			k[i] = []byte{0x00, 0x01, 0x7f, 0xfe, 0xff}[r.IntN(5)]
		}
		keys = append(keys, k)
	}
	for i := range 100 { // a long shared prefix with every length across a boundary
		keys = append(keys, bytes.Repeat([]byte{0xab}, 95+i%10))
	}
	slices.SortFunc(keys, bytes.Compare)
	keys = slices.CompactFunc(keys, bytes.Equal)
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = s.objectName(k)
		got, err := s.keyOf(names[i])
		if err != nil || !bytes.Equal(got, k) {
			t.Fatalf("keyOf(objectName(%x)) = %x, %v", k, got, err)
		}
		for _, seg := range strings.Split(strings.TrimPrefix(names[i], "p/"), "/") {
			if len(seg) > segmentLen {
				t.Fatalf("segment of %d bytes in %q", len(seg), names[i])
			}
		}
	}
	if !slices.IsSorted(names) {
		t.Fatalf("object names do not sort like keys")
	}
	for i := 0; i < len(keys); i += 7 {
		k := keys[i]
		for j := range len(k) {
			if !strings.HasPrefix(names[i], s.namePrefix(k[:j])) {
				t.Fatalf("name %q does not start with namePrefix(%x)", names[i], k[:j])
			}
		}
		after := s.namePrefix(k)
		for j, n := range names {
			if (n > after) != (j >= i) {
				t.Fatalf("StartAfter for %x misplaces key %x", k, keys[j])
			}
		}
	}
	if _, err := s.keyOf("p/zz-"); err == nil {
		t.Fatal("keyOf accepted a non-hex name")
	}
	if _, err := s.keyOf("p/" + strings.Repeat("a", 202) + "-"); err == nil {
		t.Fatal("keyOf accepted a name without its segment separator")
	}
}

// TestTombstones checks the object-storage specifics behind Delete: a deleted key is a tombstone object with
// the constant tombstone body (so its ETag is TombstoneETag), invisible to Get and Scan, and a create over it
// works; the tombstone's ETag is never accepted as a caller's version.
func TestTombstones(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	s, err := New(srv.Client(), bucket, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(tombstoneBody) != tombstoneLen {
		t.Fatalf("tombstone body is %d bytes, scans skip %d", len(tombstoneBody), tombstoneLen)
	}
	ctx := context.Background()
	v := storetest.MustSet(t, s, "gone", persistence.NoVersion, "x")
	if err := s.Delete(ctx, []byte("gone"), v); err != nil {
		t.Fatal(err)
	}
	info, err := srv.Client().StatObject(ctx, bucket, s.objectName([]byte("gone")), minio.StatObjectOptions{})
	if err != nil || info.Size != tombstoneLen || info.ETag != TombstoneETag {
		t.Fatalf("tombstone object: size %d, ETag %q, %v; want %d bytes, ETag %q", info.Size, info.ETag, err, tombstoneLen, TombstoneETag)
	}
	if _, err := s.Get(ctx, []byte("gone")); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("Get(tombstone) = %v", err)
	}
	if _, err := s.CompareAndSet(ctx, []byte("gone"), persistence.Version(TombstoneETag), []byte("sneak")); !errors.Is(err, persistence.ErrVersionMismatch) {
		t.Fatalf("CompareAndSet(deleted key, tombstone ETag) = %v, want ErrVersionMismatch", err)
	}
	if err := s.Delete(ctx, []byte("gone"), persistence.Version(TombstoneETag)); !errors.Is(err, persistence.ErrVersionMismatch) {
		t.Fatalf("Delete(deleted key, tombstone ETag) = %v, want ErrVersionMismatch", err)
	}
	if _, err := s.Get(ctx, []byte("gone")); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("Get after refused writes = %v, want ErrNotFound", err)
	}
	storetest.MustSet(t, s, "gone", persistence.NoVersion, "back")
	if _, err := s.CompareAndSet(ctx, []byte(strings.Repeat("k", MaxKeyLen+1)), persistence.NoVersion, nil); !errors.Is(err, persistence.ErrInvalidKey) {
		t.Fatalf("over-long key = %v, want ErrInvalidKey", err)
	}
}

// TestOlderTombstones checks that tombstones with random bodies, as earlier versions of the store wrote them,
// still read as deleted keys and are replaced by a create, exactly once among racing creators.
func TestOlderTombstones(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	s, err := New(srv.Client(), bucket, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for round := range 5 {
		key := []byte{'o', byte('0' + round)}
		old := append([]byte{magic, kindTombstone}, make([]byte, tombstoneLen-2)...)
		_, _ = crand.Read(old[2:])
		if _, err := srv.Client().PutObject(ctx, bucket, s.objectName(key), bytes.NewReader(old), int64(len(old)),
			minio.PutObjectOptions{DisableMultipart: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, key); !errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("Get(older tombstone) = %v, want ErrNotFound", err)
		}
		var wg sync.WaitGroup
		var wins atomic.Int32
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.CompareAndSet(ctx, key, persistence.NoVersion, []byte{byte(i)})
				switch {
				case err == nil:
					wins.Add(1)
				case !errors.Is(err, persistence.ErrVersionMismatch):
					t.Errorf("racer %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d: %d creators won over an older tombstone, want 1", round, n)
		}
	}
}

func TestCheckConditionalWrites(t *testing.T) {
	srv := s3test.Start(t)
	s, err := New(srv.Client(), srv.NewBucket(t), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	storetest.MustSet(t, s, "a", persistence.NoVersion, "x")
	if err := s.CheckConditionalWrites(ctx); err != nil {
		t.Fatal(err)
	}
	// The probe is gone, and would not have shown in scans anyway.
	items, err := s.Scan(ctx, nil, nil, 10)
	if err != nil || len(items) != 1 {
		t.Fatalf("Scan after check = %v, %v", items, err)
	}
	n := 0
	for obj := range srv.Client().ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("bucket holds %d objects after the check, want 1", n)
	}
}

// TestTornObjects checks the store against objects torn the way a kill -9 of versitygw in sidecar mode tears
// them: the server stored a PUT's new ETag but never published its body, so the old body stays with an ETag
// that belongs to no body anyone can read, and the server compares If-Match with that ETag for good. Such a
// key must not fail every read and write forever: the store repairs it to the body that is there (the torn
// PUT never answered, so its caller never took it for written), once, fenced like any write.
func TestTornObjects(t *testing.T) {
	srv := s3test.StartSidecar(t)
	bucket := srv.NewBucket(t)
	s, err := New(srv.Client(), bucket, "records/")
	if err != nil {
		t.Fatal(err)
	}
	var repairs, refusals atomic.Int32
	s.OnTorn(func(tr Torn) {
		if tr.Repaired {
			repairs.Add(1)
		} else {
			refusals.Add(1)
		}
	})
	// oneRepair checks that the store reported exactly one repair since the last check.
	oneRepair := func() {
		t.Helper()
		if n := repairs.Swap(0); n != 1 {
			t.Errorf("%d repairs reported, want 1", n)
		}
	}
	ctx := context.Background()
	// tear stores the ETag of a value write that never got published.
	tear := func(key string) {
		t.Helper()
		lost, err := valueBody([]byte("never published"))
		if err != nil {
			t.Fatal(err)
		}
		srv.TearETag(t, bucket, s.objectName([]byte(key)), md5Hex(lost))
	}
	// consistent checks that the object's stored ETag is the MD5 of its body again.
	consistent := func(key string) {
		t.Helper()
		b, etag, err := s.readOnce(ctx, s.objectName([]byte(key)))
		if err != nil || !sameETag(etag, md5Hex(b)) {
			t.Fatalf("%s after repair: ETag %q, body MD5 %s, %v", key, etag, md5Hex(b), err)
		}
	}

	t.Run("ValueOverValue", func(t *testing.T) {
		old := storetest.MustSet(t, s, "org/1", persistence.NoVersion, "balance 100")
		tear("org/1")
		it, err := s.Get(ctx, []byte("org/1"))
		if err != nil || string(it.Value) != "balance 100" {
			t.Fatalf("Get(torn) = %q, %v; want the published value", it.Value, err)
		}
		consistent("org/1")
		oneRepair()
		// A holder of the version from before the tear is fenced, not let through.
		if _, err := s.CompareAndSet(ctx, []byte("org/1"), old, []byte("stale")); !errors.Is(err, persistence.ErrVersionMismatch) {
			t.Fatalf("CompareAndSet(pre-tear version) = %v, want ErrVersionMismatch", err)
		}
		v, err := s.CompareAndSet(ctx, []byte("org/1"), it.Version, []byte("balance 90"))
		if err != nil {
			t.Fatalf("CompareAndSet(repaired version) = %v", err)
		}
		if it, err := s.Get(ctx, []byte("org/1")); err != nil || string(it.Value) != "balance 90" || it.Version != v {
			t.Fatalf("Get after write = %q %q, %v; want balance 90 %q", it.Value, it.Version, err, v)
		}
	})

	t.Run("ConcurrentReaders", func(t *testing.T) {
		storetest.MustSet(t, s, "org/2", persistence.NoVersion, "v")
		tear("org/2")
		// Readers that meet the torn object at once all get the value (one repairs, the others read its repair);
		// then each writes from the version it read, and exactly one wins.
		versions := make([]persistence.Version, 8)
		var wg sync.WaitGroup
		for i := range versions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				it, err := s.Get(ctx, []byte("org/2"))
				if err != nil || string(it.Value) != "v" {
					t.Errorf("reader %d: Get(torn) = %q, %v", i, it.Value, err)
				}
				versions[i] = it.Version
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		var wins atomic.Int32
		for i, v := range versions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.CompareAndSet(ctx, []byte("org/2"), v, []byte{byte(i)}); err == nil {
					wins.Add(1)
				} else if !errors.Is(err, persistence.ErrVersionMismatch) {
					t.Errorf("writer %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("%d writers won from the versions they read, want 1", n)
		}
		consistent("org/2")
		oneRepair()
	})

	t.Run("DeleteNeverPublished", func(t *testing.T) {
		// A delete cut off inside its commit: the value stays with the tombstone's ETag.
		storetest.MustSet(t, s, "job/1", persistence.NoVersion, "queued")
		srv.TearETag(t, bucket, s.objectName([]byte("job/1")), TombstoneETag)
		it, err := s.Get(ctx, []byte("job/1"))
		if err != nil || string(it.Value) != "queued" {
			t.Fatalf("Get(torn delete) = %q, %v; want the value", it.Value, err)
		}
		consistent("job/1")
		oneRepair()
		if _, err := s.CompareAndSet(ctx, []byte("job/1"), persistence.NoVersion, []byte("again")); !errors.Is(err, persistence.ErrVersionMismatch) {
			t.Fatalf("create over the repaired value = %v, want ErrVersionMismatch", err)
		}
	})

	t.Run("CreateOverTombstoneNeverPublished", func(t *testing.T) {
		v := storetest.MustSet(t, s, "job/2", persistence.NoVersion, "x")
		if err := s.Delete(ctx, []byte("job/2"), v); err != nil {
			t.Fatal(err)
		}
		tear("job/2")
		if _, err := s.Get(ctx, []byte("job/2")); !errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("Get(torn tombstone) = %v, want ErrNotFound", err)
		}
		consistent("job/2")
		oneRepair()
		storetest.MustSet(t, s, "job/2", persistence.NoVersion, "created")
	})

	t.Run("CreateNeverPublished", func(t *testing.T) {
		// A create cut off inside its commit: an ETag with no object at all. The key reads as missing, and the
		// server refuses every create; nobody but the cut-off writer knows the ETag.
		lost, err := valueBody([]byte("never published"))
		if err != nil {
			t.Fatal(err)
		}
		name := s.objectName([]byte("job/3"))
		srv.TearETag(t, bucket, name, md5Hex(lost))
		if _, err := s.Get(ctx, []byte("job/3")); !errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("Get(ETag without object) = %v, want ErrNotFound", err)
		}
		_, err = s.CompareAndSet(ctx, []byte("job/3"), persistence.NoVersion, []byte("x"))
		if !errors.Is(err, ErrTornObject) || !strings.Contains(err.Error(), "docs/operations.md") {
			t.Fatalf("create over an ETag without object = %v, want ErrTornObject naming the operator docs", err)
		}
		if n := refusals.Swap(0); n != 1 {
			t.Errorf("%d refusals reported, want 1", n)
		}
		// The store that made the cut-off write knows its ETag (its PUT got no answer) and repairs the key.
		s.remember(name, md5Hex(lost))
		v := storetest.MustSet(t, s, "job/3", persistence.NoVersion, "created")
		if it, err := s.Get(ctx, []byte("job/3")); err != nil || string(it.Value) != "created" || it.Version != v {
			t.Fatalf("Get after the repairing create = %q %q, %v", it.Value, it.Version, err)
		}
		consistent("job/3")
		oneRepair()
	})

	t.Run("Scan", func(t *testing.T) {
		storetest.MustSet(t, s, "scan/a", persistence.NoVersion, "a")
		storetest.MustSet(t, s, "scan/b", persistence.NoVersion, "b")
		tear("scan/a")
		items, err := s.Scan(ctx, []byte("scan/"), nil, 10)
		if err != nil || len(items) != 2 || string(items[0].Value) != "a" || string(items[1].Value) != "b" {
			t.Fatalf("Scan over a torn key = %v, %v", items, err)
		}
		if _, err := s.CompareAndSet(ctx, []byte("scan/a"), items[0].Version, []byte("a2")); err != nil {
			t.Fatalf("CompareAndSet(version from the scan) = %v", err)
		}
		oneRepair()
	})
}

// TestLockMate: the barrier object of a name falls in the same publish-lock shard of versitygw's posix backend
// (the first byte of the name's SHA-256), is an internal name that scans skip, and there is one per shard.
func TestLockMate(t *testing.T) {
	s := &Store{prefix: "records/"}
	mates := map[string]bool{}
	for i := range 5000 {
		name := s.objectName([]byte(fmt.Sprintf("job/req_%d", i)))
		m := s.lockMate(name)
		if sha256.Sum256([]byte(m))[0] != sha256.Sum256([]byte(name))[0] {
			t.Fatalf("lockMate(%q) = %q, another shard", name, m)
		}
		if !strings.HasPrefix(m, s.prefix+internalMarker) {
			t.Fatalf("lockMate(%q) = %q, not an internal name", name, m)
		}
		mates[m] = true
	}
	if len(mates) > 256 {
		t.Fatalf("%d barrier objects, want one per shard at most", len(mates))
	}
}
