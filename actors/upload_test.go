package actors

import (
	"errors"
	"testing"
	"time"
)

func received(t *testing.T, kind UploadKind, name string, now time.Time) *Upload {
	t.Helper()
	u, err := NewUpload(NewUploadID(), "org_1", kind, name, 100, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Receive("uploads/org_1/x/y", "abc", 100, now); err != nil {
		t.Fatal(err)
	}
	return u
}

// mustRefuse runs cmd on a clone and checks that it fails with want and changes nothing.
func mustRefuse(t *testing.T, u *Upload, want error, cmd func(*Upload) error) {
	t.Helper()
	c := u.Clone()
	if err := cmd(c); !errors.Is(err, want) {
		t.Fatalf("got %v, want %v", err, want)
	}
	if c.Revision != u.Revision || c.Status != u.Status || (c.Lock == nil) != (u.Lock == nil) {
		t.Fatalf("a refused command changed the upload: %+v -> %+v", u, c)
	}
}

func TestNewUploadLimits(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		kind UploadKind
		name string
		size int64
		want error
	}{
		{UploadImage, "a.jpg", 50_000_000, nil},
		{UploadImage, "a.jpg", 50_000_001, ErrUploadTooLarge},
		{UploadDocument, "a.pdf", 20_000_001, ErrUploadTooLarge},
		{UploadVideo, "a.mp4", 20_000_001, ErrUploadTooLarge},
		{UploadDetect, "A.PNG", 192_000_000, nil},
		{UploadDetect, "a.png", 192_000_001, ErrUploadTooLarge},
		{UploadDetect, "a.pdf", 64_000_001, ErrUploadTooLarge},
		{UploadDetect, "a.mov", 100_000_001, ErrUploadTooLarge},
		{UploadDetect, "a.mov", 100_000_000, nil},
		{UploadDetect, "a", 10, ErrUploadInvalid},
		{UploadKind("audio"), "a.mp3", 10, ErrUploadInvalid},
		{UploadImage, "", 10, ErrUploadInvalid},
		{UploadImage, "a\x00.jpg", 10, ErrUploadInvalid},
		{UploadImage, "a.jpg", 0, ErrUploadInvalid},
	}
	for _, c := range cases {
		_, err := NewUpload(NewUploadID(), "org_1", c.kind, c.name, c.size, now)
		if !errors.Is(err, c.want) {
			t.Errorf("%s %q %d: %v, want %v", c.kind, c.name, c.size, err, c.want)
		}
	}
	u, _ := NewUpload(NewUploadID(), "org_1", UploadDetect, "scan.PDF", 10, now)
	if u.Media != MediaDocument || !ValidUploadID(u.ID) || u.URLExpiresAt != now.Add(6*time.Hour) || u.ExpiresAt != now.Add(24*time.Hour) {
		t.Fatalf("%+v", u)
	}
}

func TestUploadLifecycle(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	u, _ := NewUpload(NewUploadID(), "org_1", UploadImage, "a.jpg", 100, now)
	mustRefuse(t, u, ErrUploadNotReceived, func(u *Upload) error { return u.Claim("req_a", UploadImage, MediaImage, now) })
	mustRefuse(t, u, ErrUploadSize, func(u *Upload) error { return u.Receive("k", "h", 99, now) })
	if err := u.Receive("k", "h", 100, now); err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, u, ErrUploadNotPending, func(u *Upload) error { return u.Receive("k", "h", 100, now) })
	mustRefuse(t, u, ErrUploadKind, func(u *Upload) error { return u.Claim("req_a", UploadDetect, MediaImage, now) })
	if err := u.Claim("req_a", UploadImage, MediaImage, now); err != nil {
		t.Fatal(err)
	}
	// Another request waits until the lease lapses; the holder may claim again.
	mustRefuse(t, u, ErrUploadInUse, func(u *Upload) error { return u.Claim("req_b", UploadImage, MediaImage, now.Add(time.Minute)) })
	if err := u.Clone().Claim("req_a", UploadImage, MediaImage, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	// A released upload is free at once.
	if err := u.Release("req_a"); err != nil || u.Lock != nil {
		t.Fatalf("release: %v %+v", err, u.Lock)
	}
	if err := u.Claim("req_b", UploadImage, MediaImage, now); err != nil {
		t.Fatal(err)
	}
	// req_b crashed: after its lease req_c takes the upload and consumes it.
	later := now.Add(UploadClaimLease)
	if err := u.Claim("req_c", UploadImage, MediaImage, later); err != nil {
		t.Fatalf("claim after the lease: %v", err)
	}
	mustRefuse(t, u, ErrUploadInUse, func(u *Upload) error { return u.Consume("req_b", later) })
	if err := u.Consume("req_c", later); err != nil || u.Status != UploadConsumed || u.RequestID != "req_c" || u.Lock != nil {
		t.Fatalf("consume: %v %+v", err, u)
	}
	rev := u.Revision
	if err := u.Consume("req_c", later); err != nil || u.Revision != rev {
		t.Fatalf("repeated consume changed the upload: %v", err)
	}
	if err := u.Claim("req_c", UploadImage, MediaImage, later.Add(48*time.Hour)); err != nil || u.Revision != rev {
		t.Fatalf("the consuming request's replay: %v", err)
	}
	mustRefuse(t, u, ErrUploadConsumed, func(u *Upload) error { return u.Claim("req_d", UploadImage, MediaImage, later) })
	// A failed replay does not reject a consumed upload; expiry leaves it consumed.
	if err := u.Reject("req_c", "invalid_image", "x"); err != nil || u.Status != UploadConsumed || u.Revision != rev {
		t.Fatalf("reject after consume: %v %+v", err, u)
	}
	if err := u.Expire(later.Add(48 * time.Hour)); err != nil || u.Status != UploadConsumed {
		t.Fatalf("expire consumed: %v %+v", err, u)
	}
}

func TestUploadRejectAndExpire(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	u := received(t, UploadImage, "a.jpg", now)
	if err := u.Reject("req_x", "invalid_image", "not an image"); err != nil || u.Status != UploadReceived {
		t.Fatalf("reject without the lock: %v %+v", err, u)
	}
	if err := u.Claim("req_a", UploadImage, MediaImage, now); err != nil {
		t.Fatal(err)
	}
	if err := u.Reject("req_a", "invalid_image", "not an image"); err != nil || u.Status != UploadRejected || u.Error != "not an image" {
		t.Fatalf("reject: %v %+v", err, u)
	}
	mustRefuse(t, u, ErrUploadRejected, func(u *Upload) error { return u.Claim("req_b", UploadImage, MediaImage, now) })

	v := received(t, UploadDetect, "a.png", now)
	end := now.Add(UploadRetention)
	if v.StatusAt(end.Add(-time.Nanosecond)) != UploadReceived || v.StatusAt(end) != UploadExpired {
		t.Fatal("expiry boundary")
	}
	mustRefuse(t, v, ErrUploadExpired, func(u *Upload) error { return u.Claim("req_a", UploadDetect, MediaImage, end) })
	if err := v.Expire(end.Add(-time.Second)); err != nil || v.Status != UploadReceived {
		t.Fatalf("early expire: %v", err)
	}
	if err := v.Expire(end); err != nil || v.Status != UploadExpired {
		t.Fatalf("expire: %v %+v", err, v)
	}
	p, _ := NewUpload(NewUploadID(), "org_1", UploadImage, "a.jpg", 100, now)
	mustRefuse(t, p, ErrUploadExpired, func(u *Upload) error { return u.Receive("k", "h", 100, end) })
}
