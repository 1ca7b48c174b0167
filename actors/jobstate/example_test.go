package jobstate_test

import (
	"fmt"
	"strings"
	"time"

	"filigrane/actors/jobstate"
)

// Example shows the loop a job actor runs around a record: apply a command at the clock's time, write the
// record when its Revision moved (compare-and-set in the real actor), then perform and settle what
// PendingEffects asks for.
func Example() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rec, err := jobstate.Accept(jobstate.Spec{
		RequestID: "req_" + strings.Repeat("a", 64), OrgID: "org_1",
		Operation: jobstate.OperationEmbed, Media: jobstate.MediaImage, Format: "PNG", FrameCount: 1,
		CreditsHeld: 1, WatermarkID: strings.Repeat("c", 64),
		Input: jobstate.Input{BlobKey: "in/1", SHA256: strings.Repeat("b", 64), Size: 1000},
	}, now)
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.Status, rec.PendingEffects(now)[0].Kind)

	// A worker claims it, crashes, and its lease runs out; the actor's wake-up ticks it into a retry.
	first, _ := rec.Claim("node1/worker3", now, 30*time.Second)
	now = first.ExpiresAt
	rec.Tick(now)
	fmt.Println(rec.Status, rec.Attempts, rec.LastError.Code, rec.NextAttemptAt.Sub(now))

	// Another worker takes the retry and finishes; the first worker's late result is refused.
	now = rec.NextAttemptAt
	second, _ := rec.Claim("node2/worker1", now, 30*time.Second)
	out := jobstate.Output{BlobKey: "out/1", Size: 1200, SHA256: strings.Repeat("d", 64), ContentType: "image/png",
		AssetID: "ast_2", SourceAssetID: "ast_1", WatermarkID: rec.WatermarkID, Charge: 1,
		Accelerator: jobstate.AcceleratorCPU}
	fmt.Println(rec.Succeed(first.Token, out, now) != nil)
	rev := rec.Revision
	if err := rec.Succeed(second.Token, out, now.Add(3*time.Second)); err != nil {
		panic(err)
	}
	fmt.Println(rec.Status, rec.Revision > rev)

	// The terminal record owes its commit effects; the actor performs each idempotently, then marks it.
	for _, e := range rec.PendingEffects(now) {
		fmt.Println("perform", e.Kind, e.Amount)
		if err := rec.MarkSettled(e.Kind); err != nil {
			panic(err)
		}
	}
	fmt.Println(rec.Committed(), len(rec.PendingEffects(now)), *rec.Receipt().ResultExpiresAt)

	// Output:
	// queued dispatch
	// retrying 1 worker_lost 2s
	// true
	// succeeded true
	// perform write_assets 0
	// perform charge_credits 1
	// true 0 2026-01-02T12:00:35Z
}
