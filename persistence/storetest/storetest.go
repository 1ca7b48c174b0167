// Package storetest is the contract suite for persistence.Store, and a slow store for tests of what waits on
// a read (Held). Every backend runs it from its own tests:
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) persistence.Store { return openEmptyStore(t) })
//	}
//
// open must return an empty store and arrange its cleanup (Close) with t.Cleanup. The suite closes nothing
// itself except in the use-after-close case, so open's cleanup must tolerate a second Close.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"filigrane/persistence"
)

// Run runs the Store contract against stores made by open, one fresh store per subtest.
func Run(t *testing.T, open func(t *testing.T) persistence.Store) {
	t.Run("GetMissing", func(t *testing.T) { testGetMissing(t, open(t)) })
	t.Run("CreateOnly", func(t *testing.T) { testCreateOnly(t, open(t)) })
	t.Run("CompareAndSet", func(t *testing.T) { testCompareAndSet(t, open(t)) })
	t.Run("StaleVersion", func(t *testing.T) { testStaleVersion(t, open(t)) })
	t.Run("VersionsAreNotReused", func(t *testing.T) { testVersionsNotReused(t, open(t)) })
	t.Run("BinaryKeysAndValues", func(t *testing.T) { testBinary(t, open(t)) })
	t.Run("EmptyKeyRefused", func(t *testing.T) { testEmptyKey(t, open(t)) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, open(t)) })
	t.Run("ScanOrderAndLimit", func(t *testing.T) { testScanOrder(t, open(t)) })
	t.Run("ScanPrefixIsolation", func(t *testing.T) { testScanPrefixIsolation(t, open(t)) })
	t.Run("ScanPaging", func(t *testing.T) { testScanPaging(t, open(t)) })
	t.Run("ScanSkipsDeleted", func(t *testing.T) { testScanSkipsDeleted(t, open(t)) })
	t.Run("ContextCancelled", func(t *testing.T) { testContextCancelled(t, open(t)) })
	t.Run("RacingCreate", func(t *testing.T) { testRacingCreate(t, open(t)) })
	t.Run("RacingCompareAndSet", func(t *testing.T) { testRacingCAS(t, open(t)) })
	t.Run("CloseThenUse", func(t *testing.T) { testCloseThenUse(t, open(t)) })
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// MustSet writes value at key expecting expect and returns the new version; it fails the test on error.
func MustSet(t testing.TB, s persistence.Store, key string, expect persistence.Version, value string) persistence.Version {
	t.Helper()
	v, err := s.CompareAndSet(context.Background(), []byte(key), expect, []byte(value))
	if err != nil {
		t.Fatalf("CompareAndSet(%q, %q): %v", key, expect, err)
	}
	if v == persistence.NoVersion {
		t.Fatalf("CompareAndSet(%q, %q) returned NoVersion", key, expect)
	}
	return v
}

// expectValue checks that key holds value at version v (v empty: any version).
func expectValue(t *testing.T, s persistence.Store, key string, value string, v persistence.Version) {
	t.Helper()
	it, err := s.Get(ctxFor(t), []byte(key))
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if string(it.Value) != value {
		t.Fatalf("Get(%q) = %q, want %q", key, it.Value, value)
	}
	if string(it.Key) != key {
		t.Fatalf("Get(%q).Key = %q", key, it.Key)
	}
	if v != "" && it.Version != v {
		t.Fatalf("Get(%q).Version = %q, want %q", key, it.Version, v)
	}
}

func expectMissing(t *testing.T, s persistence.Store, key string) {
	t.Helper()
	it, err := s.Get(ctxFor(t), []byte(key))
	if !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("Get(%q) = %q, %v; want ErrNotFound", key, it.Value, err)
	}
}

func expectMismatch(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, persistence.ErrVersionMismatch) {
		t.Fatalf("%s: err = %v, want ErrVersionMismatch", what, err)
	}
}

func testGetMissing(t *testing.T, s persistence.Store) {
	expectMissing(t, s, "nothing/here")
	MustSet(t, s, "nothing/there", persistence.NoVersion, "x")
	expectMissing(t, s, "nothing/her")
	expectMissing(t, s, "nothing/here")
}

func testCreateOnly(t *testing.T, s persistence.Store) {
	ctx := ctxFor(t)
	v1 := MustSet(t, s, "org/1", persistence.NoVersion, "first")
	expectValue(t, s, "org/1", "first", v1)
	_, err := s.CompareAndSet(ctx, []byte("org/1"), persistence.NoVersion, []byte("second"))
	expectMismatch(t, err, "second create-only write")
	expectValue(t, s, "org/1", "first", v1)
}

func testCompareAndSet(t *testing.T, s persistence.Store) {
	v1 := MustSet(t, s, "job/a", persistence.NoVersion, "one")
	v2 := MustSet(t, s, "job/a", v1, "two")
	if v2 == v1 {
		t.Fatalf("version did not change on write: %q", v2)
	}
	expectValue(t, s, "job/a", "two", v2)
	// Writing the same bytes again is still a new write with a new version: versions name writes, not contents.
	v3 := MustSet(t, s, "job/a", v2, "two")
	if v3 == v2 {
		t.Fatalf("rewriting the same value kept version %q", v3)
	}
	expectValue(t, s, "job/a", "two", v3)
	// Empty value round trip.
	v4 := MustSet(t, s, "job/a", v3, "")
	expectValue(t, s, "job/a", "", v4)
}

func testStaleVersion(t *testing.T, s persistence.Store) {
	ctx := ctxFor(t)
	v1 := MustSet(t, s, "k", persistence.NoVersion, "one")
	v2 := MustSet(t, s, "k", v1, "two")
	_, err := s.CompareAndSet(ctx, []byte("k"), v1, []byte("stale"))
	expectMismatch(t, err, "CAS with stale version")
	expectValue(t, s, "k", "two", v2)

	_, err = s.CompareAndSet(ctx, []byte("k"), persistence.Version("not-a-version"), []byte("bogus"))
	expectMismatch(t, err, "CAS with a made-up version")
	expectValue(t, s, "k", "two", v2)

	// A version of another key does not unlock this one... unless versions collide by construction, which the
	// contract does not forbid; so only check that a CAS on a missing key with any version fails.
	_, err = s.CompareAndSet(ctx, []byte("absent"), v2, []byte("x"))
	expectMismatch(t, err, "CAS on a missing key with a version")
	expectMissing(t, s, "absent")
}

func testVersionsNotReused(t *testing.T, s persistence.Store) {
	ctx := ctxFor(t)
	v1 := MustSet(t, s, "aba", persistence.NoVersion, "same")
	if err := s.Delete(ctx, []byte("aba"), v1); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	v2 := MustSet(t, s, "aba", persistence.NoVersion, "same")
	if v2 == v1 {
		t.Fatalf("re-created key got its old version %q back: a writer holding the old version would win (ABA)", v1)
	}
	_, err := s.CompareAndSet(ctx, []byte("aba"), v1, []byte("from before the delete"))
	expectMismatch(t, err, "CAS with a version from before the delete")
	expectValue(t, s, "aba", "same", v2)
}

func testBinary(t *testing.T, s persistence.Store) {
	ctx := ctxFor(t)
	keys := [][]byte{
		{0x00}, {0x00, 0x00}, {0x01, 0xff}, {0xff}, {0xff, 0xff, 0xff}, {'a', 0x00, 'b'}, []byte("a/b c%2F/é"),
		bytes.Repeat([]byte{0x7f}, 200),
	}
	for i, k := range keys {
		val := append([]byte{0x00, 0xff, byte(i)}, k...)
		if _, err := s.CompareAndSet(ctx, k, persistence.NoVersion, val); err != nil {
			t.Fatalf("CompareAndSet(%x): %v", k, err)
		}
	}
	for i, k := range keys {
		it, err := s.Get(ctx, k)
		if err != nil {
			t.Fatalf("Get(%x): %v", k, err)
		}
		want := append([]byte{0x00, 0xff, byte(i)}, k...)
		if !bytes.Equal(it.Value, want) || !bytes.Equal(it.Key, k) {
			t.Fatalf("Get(%x) = key %x value %x, want value %x", k, it.Key, it.Value, want)
		}
	}
	items, err := s.Scan(ctx, nil, nil, 100)
	if err != nil {
		t.Fatalf("Scan all: %v", err)
	}
	sorted := slices.Clone(keys)
	slices.SortFunc(sorted, bytes.Compare)
	if got := itemKeys(items); !slices.EqualFunc(got, sorted, bytes.Equal) {
		t.Fatalf("Scan all keys = %x, want %x", got, sorted)
	}
}

func testEmptyKey(t *testing.T, s persistence.Store) {
	ctx := ctxFor(t)
	if _, err := s.CompareAndSet(ctx, nil, persistence.NoVersion, []byte("x")); !errors.Is(err, persistence.ErrInvalidKey) {
		t.Fatalf("CompareAndSet(empty key) = %v, want ErrInvalidKey", err)
	}
	if err := s.Delete(ctx, nil, persistence.NoVersion); !errors.Is(err, persistence.ErrInvalidKey) {
		t.Fatalf("Delete(empty key) = %v, want ErrInvalidKey", err)
	}
}

func testDelete(t *testing.T, s persistence.Store) {
	ctx := ctxFor(t)
	if err := s.Delete(ctx, []byte("never"), persistence.NoVersion); err != nil {
		t.Fatalf("Delete(missing, NoVersion) = %v, want nil", err)
	}
	v1 := MustSet(t, s, "d", persistence.NoVersion, "one")
	v2 := MustSet(t, s, "d", v1, "two")
	expectMismatch(t, s.Delete(ctx, []byte("d"), v1), "Delete with stale version")
	expectValue(t, s, "d", "two", v2)
	expectMismatch(t, s.Delete(ctx, []byte("d"), persistence.NoVersion), "Delete of an existing key with NoVersion")
	expectValue(t, s, "d", "two", v2)
	if err := s.Delete(ctx, []byte("d"), v2); err != nil {
		t.Fatalf("Delete with current version: %v", err)
	}
	expectMissing(t, s, "d")
	expectMismatch(t, s.Delete(ctx, []byte("d"), v2), "second Delete with the deleted version")
	if err := s.Delete(ctx, []byte("d"), persistence.NoVersion); err != nil {
		t.Fatalf("Delete(deleted, NoVersion) = %v, want nil", err)
	}
	_, err := s.CompareAndSet(ctx, []byte("d"), v2, []byte("zombie"))
	expectMismatch(t, err, "CAS on a deleted key with its last version")
	expectMissing(t, s, "d")
	v3 := MustSet(t, s, "d", persistence.NoVersion, "again")
	expectValue(t, s, "d", "again", v3)
}

func itemKeys(items []persistence.Item) [][]byte {
	keys := make([][]byte, len(items))
	for i, it := range items {
		keys[i] = it.Key
	}
	return keys
}

func keyStrings(items []persistence.Item) []string {
	keys := make([]string, len(items))
	for i, it := range items {
		keys[i] = string(it.Key)
	}
	return keys
}

func testScanOrder(t *testing.T, s persistence.Store) {
	ctx := ctxFor(t)
	// Written out of order, including keys that sort differently as bytes than as numbers or by length.
	keys := []string{"p/b", "p/a", "p/ab", "p/a0", "p/B", "p/", "p/z", "p/a/1", "p/10", "p/9"}
	vers := map[string]persistence.Version{}
	for _, k := range keys {
		vers[k] = MustSet(t, s, k, persistence.NoVersion, "v:"+k)
	}
	want := slices.Clone(keys)
	slices.Sort(want)

	items, err := s.Scan(ctx, []byte("p/"), nil, 100)
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	if got := keyStrings(items); !slices.Equal(got, want) {
		t.Fatalf("Scan keys = %q, want %q", got, want)
	}
	for _, it := range items {
		if string(it.Value) != "v:"+string(it.Key) || it.Version != vers[string(it.Key)] {
			t.Fatalf("Scan item %q = %q@%q, want %q@%q", it.Key, it.Value, it.Version, "v:"+string(it.Key), vers[string(it.Key)])
		}
	}

	items, err = s.Scan(ctx, []byte("p/"), nil, 3)
	if err != nil {
		t.Fatalf("Scan limit 3: %v", err)
	}
	if got := keyStrings(items); !slices.Equal(got, want[:3]) {
		t.Fatalf("Scan limit 3 = %q, want %q", got, want[:3])
	}

	// start is inclusive, and need not exist.
	items, err = s.Scan(ctx, []byte("p/"), []byte("p/a0"), 3)
	if err != nil {
		t.Fatalf("Scan from p/a0: %v", err)
	}
	i := slices.Index(want, "p/a0")
	if got := keyStrings(items); !slices.Equal(got, want[i:i+3]) {
		t.Fatalf("Scan from p/a0 = %q, want %q", got, want[i:i+3])
	}
	items, err = s.Scan(ctx, []byte("p/"), []byte("p/a00"), 100)
	if err != nil {
		t.Fatalf("Scan from p/a00: %v", err)
	}
	if got := keyStrings(items); !slices.Equal(got, want[i+1:]) {
		t.Fatalf("Scan from p/a00 = %q, want %q", got, want[i+1:])
	}

	// A start below the prefix scans the whole prefix; one above it returns nothing.
	items, err = s.Scan(ctx, []byte("p/"), []byte("a"), 100)
	if err != nil || !slices.Equal(keyStrings(items), want) {
		t.Fatalf("Scan with start below prefix = %q, %v; want %q", keyStrings(items), err, want)
	}
	items, err = s.Scan(ctx, []byte("p/"), []byte("q"), 100)
	if err != nil || len(items) != 0 {
		t.Fatalf("Scan with start past prefix = %q, %v; want nothing", keyStrings(items), err)
	}
	// An empty prefix with no match.
	items, err = s.Scan(ctx, []byte("none/"), nil, 100)
	if err != nil || len(items) != 0 {
		t.Fatalf("Scan of empty prefix = %q, %v; want nothing", keyStrings(items), err)
	}
	if _, err := s.Scan(ctx, []byte("p/"), nil, 0); err == nil {
		t.Fatalf("Scan with limit 0 succeeded; want an error")
	}
}

func testScanPrefixIsolation(t *testing.T, s persistence.Store) {
	ctx := ctxFor(t)
	type group struct {
		prefix []byte
		inside [][]byte
	}
	// Neighbours on both sides of each prefix, including 0xff bytes where the prefix end must carry over.
	all := [][]byte{
		[]byte("job"), []byte("job."), []byte("job/"), []byte("job/1"), []byte("job/\xff"), []byte("job/\xff\xff"),
		[]byte("job0"), []byte("jo"), []byte("jobs/1"),
		{'x', 0xff}, {'x', 0xff, 0x00}, {'x', 0xff, 0xff}, {'y'}, {'x', 0xfe, 0xff}, {'x'},
		{0xff, 0xff}, {0xff, 0xff, 0x01}, {0xff, 0xfe},
	}
	groups := []group{
		{[]byte("job/"), [][]byte{[]byte("job/"), []byte("job/1"), []byte("job/\xff"), []byte("job/\xff\xff")}},
		{[]byte("job"), [][]byte{[]byte("job"), []byte("job."), []byte("job/"), []byte("job/1"), []byte("job/\xff"),
			[]byte("job/\xff\xff"), []byte("job0"), []byte("jobs/1")}},
		{[]byte{'x', 0xff}, [][]byte{{'x', 0xff}, {'x', 0xff, 0x00}, {'x', 0xff, 0xff}}},
		{[]byte{0xff, 0xff}, [][]byte{{0xff, 0xff}, {0xff, 0xff, 0x01}}},
		{[]byte{0xff}, [][]byte{{0xff, 0xfe}, {0xff, 0xff}, {0xff, 0xff, 0x01}}},
	}
	for _, k := range all {
		if _, err := s.CompareAndSet(ctx, k, persistence.NoVersion, k); err != nil {
			t.Fatalf("CompareAndSet(%x): %v", k, err)
		}
	}
	for _, g := range groups {
		items, err := s.Scan(ctx, g.prefix, nil, 100)
		if err != nil {
			t.Fatalf("Scan(%x): %v", g.prefix, err)
		}
		if got := itemKeys(items); !slices.EqualFunc(got, g.inside, bytes.Equal) {
			t.Fatalf("Scan(%x) keys = %x, want %x", g.prefix, got, g.inside)
		}
	}
}

func testScanPaging(t *testing.T, s persistence.Store) {
	ctx := ctxFor(t)
	const n = 23
	var want []string
	for i := range n {
		k := fmt.Sprintf("page/%03d", i)
		want = append(want, k)
		MustSet(t, s, k, persistence.NoVersion, k)
	}
	MustSet(t, s, "pagf", persistence.NoVersion, "neighbour")
	var got []string
	var start []byte
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatalf("paging does not terminate")
		}
		items, err := s.Scan(ctx, []byte("page/"), start, 5)
		if err != nil {
			t.Fatalf("Scan page %d: %v", pages, err)
		}
		got = append(got, keyStrings(items)...)
		if len(items) < 5 {
			break
		}
		start = persistence.KeyAfter(items[len(items)-1].Key)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged scan = %q, want %q", got, want)
	}
}

func testScanSkipsDeleted(t *testing.T, s persistence.Store) {
	ctx := ctxFor(t)
	vs := map[string]persistence.Version{}
	for _, k := range []string{"s/1", "s/2", "s/3", "s/4"} {
		vs[k] = MustSet(t, s, k, persistence.NoVersion, k)
	}
	for _, k := range []string{"s/1", "s/3"} {
		if err := s.Delete(ctx, []byte(k), vs[k]); err != nil {
			t.Fatalf("Delete(%q): %v", k, err)
		}
	}
	items, err := s.Scan(ctx, []byte("s/"), nil, 1)
	if err != nil || !slices.Equal(keyStrings(items), []string{"s/2"}) {
		t.Fatalf("Scan limit 1 after deletes = %q, %v; want [s/2]", keyStrings(items), err)
	}
	items, err = s.Scan(ctx, []byte("s/"), nil, 10)
	if err != nil || !slices.Equal(keyStrings(items), []string{"s/2", "s/4"}) {
		t.Fatalf("Scan after deletes = %q, %v; want [s/2 s/4]", keyStrings(items), err)
	}
}

func testContextCancelled(t *testing.T, s persistence.Store) {
	v := MustSet(t, s, "c", persistence.NoVersion, "kept")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.CompareAndSet(ctx, []byte("c"), v, []byte("lost")); !errors.Is(err, context.Canceled) {
		t.Fatalf("CompareAndSet with cancelled context = %v, want context.Canceled", err)
	}
	if _, err := s.Get(ctx, []byte("c")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with cancelled context = %v, want context.Canceled", err)
	}
	if _, err := s.Scan(ctx, nil, nil, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("Scan with cancelled context = %v, want context.Canceled", err)
	}
	if err := s.Delete(ctx, []byte("c"), v); !errors.Is(err, context.Canceled) {
		t.Fatalf("Delete with cancelled context = %v, want context.Canceled", err)
	}
	expectValue(t, s, "c", "kept", v)
}

// racers is how many goroutines race per round; defaultRounds how many rounds. Kept small: the race detector
// and slow fsyncs multiply the cost. RoundsEnv raises the number of rounds for a soak run, for example
//
//	FILIGRANE_RACE_ROUNDS=1000 go test -count=1 -run 'TestContract/Racing' ./persistence/s3store/
const (
	racers        = 8
	defaultRounds = 5
	RoundsEnv     = "FILIGRANE_RACE_ROUNDS"
)

func raceRounds(t *testing.T) int {
	v := os.Getenv(RoundsEnv)
	if v == "" {
		return defaultRounds
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number of rounds", RoundsEnv, v)
	}
	return n
}

func testRacingCreate(t *testing.T, s persistence.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rounds, done, bad := raceRounds(t), 0, 0
	defer func() {
		t.Logf("racing create: %d of %d rounds run, %d racers each, %d rounds without exactly 1 winner", done, rounds, racers, bad)
	}()
	for round := range rounds {
		key := []byte(fmt.Sprintf("race/create/%d", round))
		if round%2 == 1 {
			// Race on a key that existed and was deleted: backends that keep deleted keys as tombstones take
			// a different path to create.
			v := MustSet(t, s, string(key), persistence.NoVersion, "before")
			if err := s.Delete(ctx, key, v); err != nil {
				t.Fatalf("Delete: %v", err)
			}
		}
		winners := race(t, func(i int) (persistence.Version, error) {
			return s.CompareAndSet(ctx, key, persistence.NoVersion, []byte(fmt.Sprint(i)))
		})
		if _, ok := checkOneWinner(t, s, key, winners, round); !ok {
			bad++
		}
		done++
	}
}

func testRacingCAS(t *testing.T, s persistence.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rounds, done, bad := raceRounds(t), 0, 0
	defer func() {
		t.Logf("racing compare-and-set: %d of %d rounds run, %d racers each, %d rounds without exactly 1 winner", done, rounds, racers, bad)
	}()
	key := []byte("race/cas")
	v := MustSet(t, s, string(key), persistence.NoVersion, "start")
	for round := range rounds {
		from := v
		if round%2 == 1 {
			// Race from a version read back with Get, as actors do after a restart, rather than one returned by
			// a write: a read must hand out only a version that belongs to the value it returned.
			it, err := s.Get(ctx, key)
			if err != nil {
				t.Fatalf("round %d: Get: %v", round, err)
			}
			from = it.Version
		}
		winners := race(t, func(i int) (persistence.Version, error) {
			return s.CompareAndSet(ctx, key, from, []byte(fmt.Sprint(i)))
		})
		var ok bool
		if v, ok = checkOneWinner(t, s, key, winners, round); !ok {
			bad++
		}
		done++
	}
}

type win struct {
	racer   int
	version persistence.Version
}

// race runs racers calls of f at once and returns the successful ones; any error other than
// ErrVersionMismatch fails the test.
func race(t *testing.T, f func(i int) (persistence.Version, error)) []win {
	t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []win
		errs    []error
	)
	gate := make(chan struct{})
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			v, err := f(i)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners = append(winners, win{i, v})
			case !errors.Is(err, persistence.ErrVersionMismatch):
				errs = append(errs, err)
			}
		}()
	}
	close(gate)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("racing writers failed with unexpected errors: %v", errors.Join(errs...))
	}
	return winners
}

// checkOneWinner reports a round without exactly one winner as a test error (the rounds go on, so that a soak
// run counts them) and returns the key's version afterwards.
func checkOneWinner(t *testing.T, s persistence.Store, key []byte, winners []win, round int) (persistence.Version, bool) {
	t.Helper()
	if len(winners) != 1 {
		t.Errorf("round %d: %d winners %v, want exactly 1", round, len(winners), winners)
		it, err := s.Get(ctxFor(t), key)
		if err != nil {
			t.Fatalf("round %d: Get after the race: %v", round, err)
		}
		return it.Version, false
	}
	expectValue(t, s, string(key), fmt.Sprint(winners[0].racer), winners[0].version)
	return winners[0].version, true
}

func testCloseThenUse(t *testing.T, s persistence.Store) {
	MustSet(t, s, "k", persistence.NoVersion, "v")
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := ctxFor(t)
	// Backends without local resources may keep working after Close; what is forbidden is a panic.
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Get after Close panicked: %v", r)
			}
		}()
		_, _ = s.Get(ctx, []byte("k"))
		_, _ = s.CompareAndSet(ctx, []byte("k2"), persistence.NoVersion, []byte("v"))
		_, _ = s.Scan(ctx, nil, nil, 1)
	}()
}
