package s3store

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
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

// TestTombstones checks the object-storage specifics behind Delete: a deleted key is a tombstone object,
// invisible to Get and Scan, and a create over it works.
func TestTombstones(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	s, err := New(srv.Client(), bucket, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	v := storetest.MustSet(t, s, "gone", persistence.NoVersion, "x")
	if err := s.Delete(ctx, []byte("gone"), v); err != nil {
		t.Fatal(err)
	}
	info, err := srv.Client().StatObject(ctx, bucket, s.objectName([]byte("gone")), minio.StatObjectOptions{})
	if err != nil || info.Size != tombstoneLen {
		t.Fatalf("tombstone object: size %d, %v", info.Size, err)
	}
	if _, err := s.Get(ctx, []byte("gone")); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("Get(tombstone) = %v", err)
	}
	storetest.MustSet(t, s, "gone", persistence.NoVersion, "back")
	if _, err := s.CompareAndSet(ctx, []byte(strings.Repeat("k", MaxKeyLen+1)), persistence.NoVersion, nil); !errors.Is(err, persistence.ErrInvalidKey) {
		t.Fatalf("over-long key = %v, want ErrInvalidKey", err)
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
