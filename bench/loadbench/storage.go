package loadbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"sync"
	"time"
)

// StorageDest is an S3 bucket the run's embed_storage operations deliver their results to (a customer's
// storage destination, docs/storage.md). A local cluster's is a second bucket on its own S3 server.
type StorageDest struct {
	Endpoint  string // host:port, plain HTTP
	Region    string
	Bucket    string
	AccessKey string
	SecretKey string
}

// registerDest creates the run's storage destination through the API (an owner key with storage:write) and
// verifies it, which a request must before naming it.
func (r *runner) registerDest(ctx context.Context) error {
	d := r.cfg.Dest
	body, _ := json.Marshal(map[string]any{"name": "bench " + r.runID, "provider": "s3", "endpoint": d.Endpoint,
		"secure": false, "region": d.Region, "bucket": d.Bucket, "prefix": r.runID, "path_style": true,
		"access_key_id": d.AccessKey, "secret_access_key": d.SecretKey})
	a := &attempt{r: r, giveUp: time.Now().Add(r.cfg.RetryFor)}
	res, ok := a.send(ctx, "POST", "/storage/destinations", "application/json", body, true)
	var dst struct {
		ID string `json:"id"`
	}
	if !ok || res.status != 201 || json.Unmarshal(res.body, &dst) != nil || dst.ID == "" {
		return fmt.Errorf("create the storage destination: %s %s", a.out.failure, describe(res))
	}
	res, ok = a.send(ctx, "POST", "/storage/destinations/"+url.PathEscape(dst.ID)+"/verify", "", nil, true)
	if !ok || res.status != 200 {
		return fmt.Errorf("verify the storage destination: %s %s", a.out.failure, describe(res))
	}
	r.destID = dst.ID
	return nil
}

func describe(res *response) string {
	if res == nil {
		return "no answer"
	}
	return fmt.Sprintf("%d %s", res.status, snippet(res.body))
}

// storageJob notes a job of an embed_storage operation.
func (r *runner) storageJob(id string) {
	r.whMu.Lock()
	r.stJobs[id] = true
	r.whMu.Unlock()
}

// StorageReport is the check of the embed_storage operations' deliveries: every job of theirs that succeeded
// must have its result stored in the destination bucket (receipt storage_status `stored`), and the stored
// object must read back through the API (GET /storage/deliveries/{id}/content).
type StorageReport struct {
	Destination string `json:"destination"`
	// Jobs is the embed_storage jobs that succeeded; Stored those whose delivery is stored and whose object
	// reads back; Failed those whose delivery failed for good; Pending those still queued or retrying at the
	// end of the wait; Unreadable stored ones whose object did not read back.
	Jobs       int      `json:"jobs"`
	Stored     int      `json:"stored"`
	Failed     int      `json:"failed"`
	FailedIDs  []string `json:"failed_ids,omitempty"`
	Pending    int      `json:"pending"`
	PendingIDs []string `json:"pending_ids,omitempty"`
	Unreadable int      `json:"unreadable"`
	// NotSucceeded is embed_storage jobs that failed or could not be read (the jobs' check counts them).
	NotSucceeded int `json:"not_succeeded"`
	// WaitS is how long the check waited after the jobs' check for deliveries to end.
	WaitS float64 `json:"wait_s"`
}

// OK says whether every succeeded job's result was stored and reads back.
func (s *StorageReport) OK() bool { return s.Failed == 0 && s.Pending == 0 && s.Unreadable == 0 }

// checkStorage reads each embed_storage job's receipt until its delivery ended (up to wait), then reads
// back each stored object.
func (r *runner) checkStorage(ctx context.Context, wait time.Duration) *StorageReport {
	rep := &StorageReport{Destination: r.destID}
	r.whMu.Lock()
	ids := make([]string, 0, len(r.stJobs))
	for id := range r.stJobs {
		ids = append(ids, id)
	}
	r.whMu.Unlock()
	sort.Strings(ids)
	began := time.Now()
	var mu sync.Mutex
	parallel(len(ids), func(i int) {
		id := ids[i]
		var st struct {
			Status          string `json:"status"`
			StorageStatus   string `json:"storage_status"`
			StorageDelivery string `json:"storage_delivery_id"`
		}
		outcome := "unread"
		for {
			a := &attempt{r: r, giveUp: time.Now().Add(r.cfg.RetryFor)}
			res, ok := a.send(ctx, "GET", "/watermarks/jobs/"+url.PathEscape(id), "", nil, true)
			if ok && res.status == 200 && json.Unmarshal(res.body, &st) == nil {
				switch {
				case st.Status != "succeeded":
					outcome = "not succeeded"
				case st.StorageStatus == "stored" || st.StorageStatus == "failed":
					outcome = st.StorageStatus
				default:
					outcome = "pending"
				}
			}
			if outcome != "pending" && outcome != "unread" || time.Since(began) > wait || ctx.Err() != nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(r.cfg.PollInterval):
			}
		}
		readable := false
		if outcome == "stored" {
			// On any node that answers (a killed node's turn moves on to the next, as every read does).
			a := &attempt{r: r, giveUp: time.Now().Add(r.cfg.RetryFor)}
			res, ok := a.send(ctx, "GET", "/storage/deliveries/"+url.PathEscape(st.StorageDelivery)+"/content", "", nil, true)
			readable = ok && res.status == 200 && len(res.body) > 0
		}
		mu.Lock()
		defer mu.Unlock()
		switch outcome {
		case "not succeeded", "unread":
			rep.NotSucceeded++
			return
		}
		rep.Jobs++
		switch {
		case outcome == "stored" && readable:
			rep.Stored++
		case outcome == "stored":
			rep.Unreadable++
			rep.FailedIDs = append(rep.FailedIDs, id)
		case outcome == "failed":
			rep.Failed++
			rep.FailedIDs = append(rep.FailedIDs, id)
		default:
			rep.Pending++
			rep.PendingIDs = append(rep.PendingIDs, id)
		}
	})
	rep.WaitS = time.Since(began).Seconds()
	return rep
}

func (s *StorageReport) writeMarkdown(out io.Writer) {
	verdict := "all stored"
	if !s.OK() {
		verdict = "**NOT ALL STORED**"
	}
	fmt.Fprintf(out, "\nStorage destination %s: %d embed_storage jobs succeeded, **%d results stored and read back, %d failed, %d still pending, %d unreadable** (%s); %d not succeeded; the check took %.1f s.\n",
		s.Destination, s.Jobs, s.Stored, s.Failed, s.Pending, s.Unreadable, verdict, s.NotSucceeded, s.WaitS)
	if len(s.FailedIDs)+len(s.PendingIDs) > 0 {
		fmt.Fprintf(out, "\nNot stored: %v %v\n", s.FailedIDs, s.PendingIDs)
	}
}
