package console

import (
	"sort"
	"strings"
	"time"
)

// recentJob is one row of the jobs page's recent list.
type recentJob struct {
	RequestID string
	At        time.Time
	Held      int64
}

// Recent jobs are found in the organization's credit ledger: every job reserves its credits under its
// request id when it is accepted (a "reserve" entry), so the newest reserve entries are the newest jobs,
// batch items included. The API has no job listing; this reads only what the console shows already (the
// ledger of the usage page), and the page's script reads each job's status through the API's own route.
const (
	recentJobsShown   = 25
	recentJobsScanned = 400 // ledger entries read: a job makes two or three (reserve, then charge or release)
)

func (c *Console) jobsPage(r *request) {
	from := uint64(0)
	if r.org.Seq > recentJobsScanned {
		from = r.org.Seq - recentJobsScanned + 1
	}
	entries, err := c.cfg.Orgs.Ledger(r.c, r.orgID, from, recentJobsScanned)
	if err != nil {
		c.unavailablePage(r.ctx, err)
		return
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Seq > entries[j].Seq })
	var jobs []recentJob
	for _, e := range entries {
		if e.Kind != "reserve" || !strings.HasPrefix(e.Operation, "req_") {
			continue
		}
		jobs = append(jobs, recentJob{RequestID: e.Operation, At: e.At, Held: e.Amount})
		if len(jobs) == recentJobsShown {
			break
		}
	}
	c.render(r, "jobs", 200, view{Title: "Jobs", Nav: "jobs", Data: jobs})
}
