package node_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/internal/clock"
	"filigrane/internal/node"
)

// smallFS mounts a tmpfs of size bytes on a temporary directory for the test: a real filesystem that fills up.
// Mounting needs root; elsewhere the test is skipped, saying so.
func smallFS(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root (the disk-full tests run as root in CI's container)")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fillTo takes the filesystem of dir down to free bytes free with one file, and returns a func that removes it.
func fillTo(t *testing.T, dir string, free uint64) func() {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	avail := st.Bavail * uint64(st.Bsize)
	if avail <= free {
		t.Fatalf("only %d bytes free, want to fill down to %d", avail, free)
	}
	name := filepath.Join(dir, "filler")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, int64(avail-free)); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
}

// A node whose data directory's filesystem runs low refuses new files (below --min-free-disk) and then new
// records (below a quarter of it) with 503 service_unavailable and Retry-After: 30, charges nothing for what
// it refused, keeps running, and takes work again as soon as space is freed, without a restart. Before, a
// full disk answered 503 without Retry-After while files failed, and the node panicked (Pebble's fatal
// commit error) once a record write met the full disk; restarted on it, the start never finished.
func TestLowDiskRefusesThenRecovers(t *testing.T) {
	t.Parallel()
	fs := smallFS(t, 48<<20)
	clk := clock.NewManual(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))
	n := startNode(t, filepath.Join(fs, "data"), clk, func(c *node.Config) { c.MinFreeDisk = 16 << 20 })
	defer stopNode(t, n)
	key, org := n.DevOrg.Secret, n.DevOrg.OrgID
	api := "http://" + n.APIAddr()
	img := photo(t, 320, 256, 7)
	embed := func() response { return post(t, api+"/watermarks/images", key, "", img, `{"o":1}`) }
	createUpload := func() response {
		return call(t, "POST", api+"/uploads", key,
			strings.NewReader(`{"filename":"a.jpg","size":1000,"kind":"image"}`))
	}
	refused := func(what string, r response) {
		t.Helper()
		if r.status != 503 || r.header.Get("Retry-After") != "30" {
			t.Fatalf("%s on a low disk: %d Retry-After %q %s, want 503 with Retry-After 30", what, r.status, r.header.Get("Retry-After"), r.body)
		}
		if p := decodeProblem(t, r); p.Code != "service_unavailable" || !strings.Contains(p.Detail, "disk space") {
			t.Fatalf("%s on a low disk: %+v", what, p)
		}
	}
	balanceNow := func() int64 {
		t.Helper()
		rep, err := actors.OrgClient{Caller: n.Cluster()}.Get(context.Background(), org)
		if err != nil || rep.Code != actors.ReplyOK {
			t.Fatalf("balance: %v %+v", err, rep)
		}
		return rep.Balance
	}

	if r := embed(); r.status != 200 {
		t.Fatalf("embed with space: %d %s", r.status, r.body)
	}
	start := balanceNow()

	// Under the files' reserve: files are refused, records still written; the metric shows what is left.
	free := fillTo(t, fs, 10<<20)
	if m := call(t, "GET", api+"/metrics", "", nil); !regexp.MustCompile(`(?m)^filigrane_data_disk_free_bytes [0-9.e+]+$`).Match(m.body) {
		t.Fatalf("no filigrane_data_disk_free_bytes in the metrics")
	}
	refused("embed", embed())
	if r := createUpload(); r.status != 201 {
		t.Fatalf("upload created above the records' reserve: %d %s", r.status, r.body)
	}
	free()
	if r := embed(); r.status != 200 {
		t.Fatalf("embed once space is freed: %d %s", r.status, r.body)
	}

	// Under the records' reserve: records are refused too, and the node stays up.
	free = fillTo(t, fs, 2<<20)
	refused("embed", embed())
	refused("POST /uploads", createUpload())
	if r := call(t, "GET", api+"/auth/api-key", key, nil); r.status != 200 {
		t.Fatalf("a read on a low disk: %d %s", r.status, r.body)
	}
	// A start on the same filesystem now stops with the reason (it never ended on a full disk).
	_, err := node.Start(context.Background(), node.Config{DataDir: filepath.Join(fs, "other"), APIAddr: "127.0.0.1:0",
		UploadAddr: "127.0.0.1:0", Logger: zerolog.Nop(), Clock: clk, SweepInterval: -1, MinFreeDisk: 16 << 20})
	if err == nil || !strings.Contains(err.Error(), "low on free space") {
		t.Fatalf("start on a low disk: %v, want an error saying the disk is low", err)
	}
	free()
	if r := createUpload(); r.status != 201 {
		t.Fatalf("upload created once space is freed: %d %s", r.status, r.body)
	}
	if r := embed(); r.status != 200 {
		t.Fatalf("embed once space is freed: %d %s", r.status, r.body)
	}
	if got := start - balanceNow(); got != 2 {
		t.Fatalf("charged %d credits for the two embeds that succeeded after the first, want 2", got)
	}
	if r := call(t, "GET", api+"/readyz", "", nil); r.status != 200 {
		t.Fatalf("readyz after recovery: %d %s", r.status, r.body)
	}
}
