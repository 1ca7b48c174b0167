package node

import (
	"context"
	"time"

	"filigrane/actors"
)

// batchNotices forwards "an item job ended" hints from job actors to batch actors. Job actors must not
// block on a batch actor (the batch actor reads their jobs while it runs a command), so the hint goes
// through this queue; a full queue drops it, and the batch learns the outcome on its next pulse or sweep.
type batchNotices struct {
	ch chan [2]string
}

func (b *batchNotices) init() {
	if b.ch == nil {
		b.ch = make(chan [2]string, 1024)
	}
}

func (b *batchNotices) notify(batchID, requestID string) {
	select {
	case b.ch <- [2]string{batchID, requestID}:
	default:
	}
}

func (b *batchNotices) run(ctx context.Context, caller actors.Caller) {
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-b.ch:
			c, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, _ = caller.Request(c, n[0], actors.KindBatch, &actors.BatchItemDone{BatchID: n[0], RequestID: n[1]})
			cancel()
		}
	}
}
