package s3store

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"errors"
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
