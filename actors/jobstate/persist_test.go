package jobstate

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"filigrane/persistence"
)

// TestPersistRoundTrip stores records in every status with persistence.Marshal and reads them back: the
// re-encoded bytes are identical and the decoded record behaves the same (times compare equal; msgpack
// decodes times in the local zone, so the package only ever compares them with Before/Equal).
func TestPersistRoundTrip(t *testing.T) {
	var recs []*Record
	for _, st := range matrixStates {
		r, _ := st.build(t)
		recs = append(recs, r)
	}
	for _, r := range recs {
		b, err := persistence.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var got Record
		if err := persistence.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		b2, err := persistence.Marshal(&got)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, b2) {
			t.Fatalf("%s: re-encoding differs", r.Status)
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("%s: decoded record: %v", r.Status, err)
		}
		if !got.Deadline.Equal(r.Deadline) || got.Revision != r.Revision || got.Idempotency != r.Idempotency ||
			(r.Lease != nil && !got.Lease.ExpiresAt.Equal(r.Lease.ExpiresAt)) ||
			(r.Output != nil && *got.Output != *r.Output) {
			t.Fatalf("%s: decoded %+v\nfrom %+v", r.Status, got, r)
		}
		now := t0.Add(10 * time.Minute)
		if !receiptEqual(got.Receipt(), r.Receipt()) {
			t.Fatalf("%s: receipts differ", r.Status)
		}
		if got.Claimable(now) != r.Claimable(now) {
			t.Fatalf("%s: claimability differs after decoding", r.Status)
		}
	}
	if v, err := persistence.SchemaOf(mustMarshal(t, recs[0])); err != nil || v != 1 {
		t.Fatalf("schema %d %v", v, err)
	}
	if err := persistence.Unmarshal(mustMarshal(t, otherSchema{}), &Record{}); !errors.Is(err, persistence.ErrUnknownSchema) {
		t.Fatalf("unknown schema: %v", err)
	}
}

type otherSchema struct{}

func (otherSchema) SchemaVersion() uint16 { return 99 }

func mustMarshal(t *testing.T, r persistence.Record) []byte {
	t.Helper()
	b, err := persistence.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func receiptEqual(a, b Receipt) bool {
	s := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	ac := func(p *Accelerator) string {
		if p == nil {
			return "<nil>"
		}
		return string(*p)
	}
	return a.RequestID == b.RequestID && a.Status == b.Status && a.Credits == b.Credits &&
		a.Attempts == b.Attempts && s(a.WebhookID) == s(b.WebhookID) && s(a.AssetID) == s(b.AssetID) &&
		s(a.SourceAssetID) == s(b.SourceAssetID) && s(a.ErrorCode) == s(b.ErrorCode) &&
		s(a.ResultExpiresAt) == s(b.ResultExpiresAt) && ac(a.Accelerator) == ac(b.Accelerator) &&
		a.StatusURL == b.StatusURL && a.ResultURL == b.ResultURL && a.BatchID == b.BatchID
}

// TestCancelPendingSurvivesStorage: a running job a cancelled batch asked to cancel keeps that in its stored
// record, so that after a restart (the record read back by another activation) the lease's lapse fails it
// with "cancelled" rather than retrying it.
func TestCancelPendingSurvivesStorage(t *testing.T) {
	r := running(t, lease30)
	if err := r.CancelWaiting(claimAt); err != nil {
		t.Fatal(err)
	}
	var got Record
	if err := persistence.Unmarshal(mustMarshal(t, r), &got); err != nil {
		t.Fatal(err)
	}
	if !got.CancelPending {
		t.Fatal("the pending cancel was not stored")
	}
	got.Tick(claimAt.Add(lease30))
	if got.Status != StatusFailed || got.ErrorCode != CodeCancelled {
		t.Fatalf("after the lease lapsed: %s %q, want failed cancelled", got.Status, got.ErrorCode)
	}
}
