package loadbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"filigrane/cluster"
	"filigrane/cluster/clustertest"
)

// Action is one step of a chaos schedule: at At after the load starts, do Kind to Target.
type Action struct {
	At time.Duration
	// Kind is kill (SIGKILL), term (SIGTERM: a node's graceful shutdown, as a deploy or a supervisor's stop
	// sends; the action waits until the process exited, SIGKILL after the recovery timeout), stop (SIGSTOP),
	// cont (SIGCONT) or restart (start a killed or terminated process again on its data and ports).
	Kind string
	// Target is "nodeN" (N from 0), "s3", or "webhook" (WebhookTarget: the run's webhook receiver, which
	// stop makes answer 500 until cont).
	Target string
}

func (a Action) String() string { return fmt.Sprintf("%s:%s:%s", a.At, a.Kind, a.Target) }

// ParseSchedule reads "5s:kill:node1,9s:restart:node1,12s:stop:s3,14s:cont:s3" for a cluster of nodes nodes.
// A process must be killed (or terminated) before it is restarted, and stopped before it is continued.
func ParseSchedule(s string, nodes int) ([]Action, error) {
	var out []Action
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		parts := strings.Split(f, ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("schedule step %q: want AT:ACTION:TARGET, e.g. 5s:kill:node1", f)
		}
		at, err := time.ParseDuration(parts[0])
		if err != nil || at < 0 {
			return nil, fmt.Errorf("schedule step %q: bad time %q", f, parts[0])
		}
		a := Action{At: at, Kind: parts[1], Target: parts[2]}
		switch a.Kind {
		case "kill", "term", "stop", "cont", "restart":
		default:
			return nil, fmt.Errorf("schedule step %q: unknown action %q (want kill, term, stop, cont, restart)", f, a.Kind)
		}
		if a.Target == WebhookTarget && a.Kind != "stop" && a.Kind != "cont" {
			return nil, fmt.Errorf("schedule step %q: the webhook receiver can only be stopped (answer 500) and continued", f)
		}
		if a.Target != "s3" && a.Target != WebhookTarget {
			i, err := strconv.Atoi(strings.TrimPrefix(a.Target, "node"))
			if !strings.HasPrefix(a.Target, "node") || err != nil || i < 0 || i >= nodes {
				return nil, fmt.Errorf("schedule step %q: target %q is not s3, webhook or node0..node%d", f, a.Target, nodes-1)
			}
		}
		out = append(out, a)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	state := map[string]string{} // target -> "", "killed", "stopped"
	for _, a := range out {
		want := map[string]string{"kill": "", "term": "", "stop": "", "restart": "killed", "cont": "stopped"}[a.Kind]
		if a.Kind == "kill" && state[a.Target] == "stopped" {
			want = "stopped" // a frozen process may be killed
		}
		if state[a.Target] != want {
			return nil, fmt.Errorf("schedule: %s: %s is %s at that point", a, a.Target, orRunning(state[a.Target]))
		}
		state[a.Target] = map[string]string{"kill": "killed", "term": "killed", "stop": "stopped", "restart": "", "cont": ""}[a.Kind]
	}
	if len(out) == 0 {
		return nil, errors.New("empty schedule")
	}
	return out, nil
}

func orRunning(s string) string {
	if s == "" {
		return "running"
	}
	return s
}

// DefaultSchedule is the schedule of a run that names none: over d, kill -9 the last node and restart it,
// freeze another (SIGSTOP) and continue it, kill the S3 server and restart it, each outage long enough to
// be noticed and with time to recover before the next.
func DefaultSchedule(d time.Duration, nodes int) []Action {
	at := func(f float64) time.Duration { return time.Duration(f * float64(d)).Round(100 * time.Millisecond) }
	last := fmt.Sprintf("node%d", nodes-1)
	out := []Action{{at(0.10), "kill", last}, {at(0.35), "restart", last}}
	if nodes > 1 {
		out = append(out, Action{at(0.45), "stop", "node0"}, Action{at(0.55), "cont", "node0"})
	}
	return append(out, Action{at(0.70), "kill", "s3"}, Action{at(0.78), "restart", "s3"})
}

// ChaosReport is what happened to the cluster and what it cost.
type ChaosReport struct {
	Schedule string         `json:"schedule"`
	Actions  []ActionReport `json:"actions"`
	// JobsLost, JobsStuck and ChargedTwice repeat the report's counts: all must be 0.
	JobsLost      int  `json:"jobs_lost"`
	JobsStuck     int  `json:"jobs_stuck"`
	JobsUnchecked int  `json:"jobs_unchecked"`
	ChargedTwice  int  `json:"charged_twice"`
	CreditsEqual  bool `json:"credits_equal"`
}

// ActionReport is one executed action.
type ActionReport struct {
	AtS    float64 `json:"at_s"`
	Action string  `json:"action"`
	Target string  `json:"target"`
	Error  string  `json:"error,omitempty"`
	// For kill and stop: the charged operations in flight on the cluster at that moment (any node's),
	// how many ended since and how many of those succeeded, and the takeover time: from the action until
	// the last of them ended. It is an upper bound of the time to resume the work elsewhere: it includes
	// the death's detection, the retry on another node, the re-run and the client's poll interval.
	OpsInFlight  int      `json:"ops_in_flight,omitempty"`
	OpsEnded     int      `json:"ops_ended,omitempty"`
	OpsSucceeded int      `json:"ops_succeeded,omitempty"`
	TakeoverS    *float64 `json:"takeover_s,omitempty"`
	// For restart and cont: from the action until the process serves again. A node: GET /auth/api-key
	// answers 200 on it (after a restart, /healthz first). The S3 server: the first charged operation
	// started after the action succeeds.
	RecoveryS *float64 `json:"recovery_s,omitempty"`
	// SelfExit: after SIGCONT the node found that the cluster had declared it dead while it was frozen, and
	// exited (a node cannot serve again under a member id the cluster removed). The harness then starts it
	// again, as a process supervisor would, and the recovery time includes that restart.
	SelfExit bool `json:"self_exit,omitempty"`
}

// ChaosConfig is a chaos run: cfg's load against local's nodes while schedule runs.
type ChaosConfig struct {
	Load     Config
	Local    *Local
	Schedule []Action
	// RecoveryTimeout bounds the wait for a restarted or continued process to serve (default 2 minutes).
	RecoveryTimeout time.Duration
}

// RunChaos runs the load and the schedule together and returns the load's report with its chaos section.
func RunChaos(ctx context.Context, cc ChaosConfig) (*Report, error) {
	if cc.RecoveryTimeout <= 0 {
		cc.RecoveryTimeout = 2 * time.Minute
	}
	cfg := cc.Load
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	for _, a := range cc.Schedule {
		if a.Target != WebhookTarget || cfg.webhooks != nil {
			continue
		}
		if cfg.Mix[OpEmbedWebhook] == 0 {
			return nil, errNoReceiver
		}
		w, err := startWebhookReceiver()
		if err != nil {
			return nil, err
		}
		defer w.close()
		cfg.webhooks = w
	}
	started := make(chan time.Time, 1)
	cfg.onStart = func(t time.Time) { started <- t }
	type result struct {
		actions []ActionReport
		at      []time.Time
	}
	resc := make(chan result, 1)
	// scheduleCtx ends with the load: no action starts after it. An action under way when the load ends runs
	// to its end under ctx (its own RecoveryTimeout bounds it): a node restarted near the end of the load is
	// still watched until it serves, rather than reported as not serving.
	scheduleCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var book *jobBook
	cfg.onBook = func(b *jobBook) { book = b }
	go func() {
		var res result
		defer func() { resc <- res }()
		var t0 time.Time
		select {
		case t0 = <-started:
		case <-scheduleCtx.Done():
			return
		}
		// Each action starts at its time; only an action on the same target waits for the one before it (a
		// restart for its kill). A recovery being watched, such as a continued node's (several probe intervals),
		// does not hold back the actions on other targets: it used to, and the default schedule's S3 kill ran
		// after the load had ended (`bench chaos` with batches, 2026-11-27).
		type slot struct {
			ar  ActionReport
			at  time.Time
			ran bool
		}
		slots := make([]slot, len(cc.Schedule))
		last := map[string]chan struct{}{} // target -> closed when its latest action ended
		var logMu sync.Mutex
		var wg sync.WaitGroup
		defer func() {
			wg.Wait()
			for _, s := range slots {
				if s.ran {
					res.actions, res.at = append(res.actions, s.ar), append(res.at, s.at)
				}
			}
		}()
		for i, a := range cc.Schedule {
			select {
			case <-scheduleCtx.Done():
				return
			case <-time.After(time.Until(t0.Add(a.At))):
			}
			before, done := last[a.Target], make(chan struct{})
			last[a.Target] = done
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer close(done)
				if before != nil {
					<-before
				}
				at := time.Now()
				logMu.Lock()
				fmt.Fprintf(cfg.Log, "bench chaos: %s %s\n", a.Kind, a.Target)
				logMu.Unlock()
				ar := ActionReport{AtS: at.Sub(t0).Seconds(), Action: a.Kind, Target: a.Target}
				if rec, err := cc.do(ctx, cfg, a, book, &ar.SelfExit); err != nil {
					ar.Error = err.Error()
				} else if (a.Kind == "restart" || a.Kind == "cont") && a.Target != WebhookTarget {
					s := rec.Seconds()
					ar.RecoveryS = &s
				}
				slots[i] = slot{ar: ar, at: at, ran: true}
			}()
		}
	}()
	rep, err := Run(ctx, cfg)
	cancel()
	res := <-resc
	if err != nil {
		return rep, err
	}
	rep.LocalNodes = len(cc.Local.Nodes.List)
	var sched []string
	for _, a := range cc.Schedule {
		sched = append(sched, a.String())
	}
	ch := &ChaosReport{Schedule: strings.Join(sched, ","), Actions: res.actions, JobsLost: rep.Jobs.Lost,
		JobsStuck: rep.Jobs.Stuck, JobsUnchecked: rep.Jobs.Unchecked}
	if rep.Credits != nil {
		ch.ChargedTwice, ch.CreditsEqual = rep.Credits.ChargedTwice, rep.Credits.Equal
	}
	for i := range ch.Actions {
		ar := &ch.Actions[i]
		if book == nil || ar.Error != "" || i >= len(res.at) || ar.Target == WebhookTarget {
			continue
		}
		at := res.at[i]
		switch {
		case ar.Action == "kill" || ar.Action == "term" || ar.Action == "stop":
			n, ended, ok, last := book.opsAcross(at)
			ar.OpsInFlight, ar.OpsEnded, ar.OpsSucceeded = n, ended, ok
			if n > 0 && ended == n {
				s := last.Sub(at).Seconds()
				ar.TakeoverS = &s
			}
		case ar.Target == "s3":
			// The store's recovery is seen by the client: the first charged operation started after the
			// restart that succeeds.
			ar.RecoveryS = nil
			if first := book.firstSuccessAfter(at); !first.IsZero() {
				s := first.Sub(at).Seconds()
				ar.RecoveryS = &s
			}
		}
	}
	if len(ch.Actions) < len(cc.Schedule) {
		rep.Notes = append(rep.Notes, fmt.Sprintf("only %d of the %d scheduled actions ran before the load ended", len(ch.Actions), len(cc.Schedule)))
	}
	rep.Chaos = ch
	return rep, nil
}

// do performs one action and, for restart and cont, waits until the process serves again.
func (cc ChaosConfig) do(ctx context.Context, cfg Config, a Action, book *jobBook, selfExit *bool) (recovery time.Duration, err error) {
	if a.Target == WebhookTarget {
		cfg.webhooks.setFailing(a.Kind == "stop")
		return 0, nil
	}
	var p *clustertest.Process
	node := -1
	if a.Target == "s3" {
		p = cc.Local.S3.List[0]
	} else {
		node, _ = strconv.Atoi(strings.TrimPrefix(a.Target, "node"))
		p = cc.Local.Nodes.List[node]
	}
	rctx, cancel := context.WithTimeout(ctx, cc.RecoveryTimeout)
	defer cancel()
	began := time.Now()
	switch a.Kind {
	case "kill":
		return 0, p.Kill()
	case "term":
		return 0, p.Stop(rctx)
	case "stop":
		return 0, p.Pause()
	case "cont":
		if err := p.Resume(); err != nil {
			return 0, err
		}
	case "restart":
		if err := p.Restart(rctx); err != nil {
			return 0, err
		}
	}
	continued := a.Kind == "cont" && node >= 0
	serveCtx := rctx
	if continued {
		// A node the cluster declared dead while it was frozen exits as soon as it learns so, which can be
		// before it answers a single request: stop waiting for it to serve once it has exited.
		var stop context.CancelFunc
		serveCtx, stop = context.WithCancel(rctx)
		defer stop()
		go func() {
			select {
			case <-p.Exited():
				stop()
			case <-serveCtx.Done():
			}
		}()
	}
	if err := cc.awaitServing(serveCtx, cfg, a, node, book); err != nil && !(continued && exited(p)) {
		return 0, err
	}
	recovery = time.Since(began)
	if !continued {
		return recovery, nil
	}
	// A node frozen longer than the failure detection was declared dead. Once it runs again it learns so
	// from the peers' probes and gossip, within a few probe intervals (plus what a loaded machine adds), and
	// exits: it cannot serve again under a member id the cluster removed. Serving before that proves nothing,
	// so the harness watches that long and restarts a node that exits, as a process supervisor (systemd's
	// Restart=on-failure) would; the recovery then runs until the restarted node serves.
	fd := cc.Local.detection
	if fd.ProbeInterval <= 0 {
		fd.ProbeInterval = cluster.DefaultFailureDetection().ProbeInterval
	}
	select {
	case <-p.Exited():
	case <-time.After(time.Until(began.Add(4*fd.ProbeInterval + clustertest.LoadSlack))):
		return recovery, nil
	case <-rctx.Done():
		return recovery, nil
	}
	*selfExit = true
	if err := p.Restart(rctx); err != nil {
		return 0, fmt.Errorf("restart after the node exited on its own: %w", err)
	}
	if err := cc.awaitServing(rctx, cfg, a, node, book); err != nil {
		return 0, err
	}
	return time.Since(began), nil
}

// exited reports whether p's current run has ended.
func exited(p *clustertest.Process) bool {
	select {
	case <-p.Exited():
		return true
	default:
		return false
	}
}

// awaitServing polls until the action's target serves: a node answers GET /auth/api-key, the S3 server lets
// a node read a job.
func (cc ChaosConfig) awaitServing(ctx context.Context, cfg Config, a Action, node int, book *jobBook) error {
	c := newHTTPClient(2, 5*time.Second)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		var status int
		var err error
		if node >= 0 {
			var v map[string]any
			status, err = c.getJSON(cc.Local.Target(node)+"/auth/api-key", cfg.Key, &v)
		} else {
			// A node that is up: any answers while the others may be down or frozen.
			for i := range cc.Local.Nodes.List {
				var v map[string]any
				id := book.sample(0)
				if status, err = c.getJSON(cc.Local.Target(i)+"/watermarks/jobs/"+url.PathEscape(id), cfg.Key, &v); err == nil && status == 200 {
					break
				}
			}
		}
		if err == nil && status == 200 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not serving %s after %s: last status %d, error %v", a.Target, a.Kind, cc.RecoveryTimeout, status, err)
		case <-t.C:
		}
	}
}

func (c *ChaosReport) writeMarkdown(w io.Writer) {
	fmt.Fprintf(w, "\nChaos schedule `%s`: **jobs lost %d, stuck %d, charged twice %d**, not checked %d, credits equal to successes: %v.\n\n",
		c.Schedule, c.JobsLost, c.JobsStuck, c.ChargedTwice, c.JobsUnchecked, c.CreditsEqual)
	fmt.Fprintln(w, "| at s | action | target | ops in flight | ended since (ok) | takeover s | recovery s | note |")
	fmt.Fprintln(w, "|---:|---|---|---:|---:|---:|---:|---|")
	opt := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f", *v)
	}
	for _, a := range c.Actions {
		inflight, ended := "-", "-"
		if a.Action == "kill" || a.Action == "term" || a.Action == "stop" {
			inflight, ended = strconv.Itoa(a.OpsInFlight), fmt.Sprintf("%d (%d)", a.OpsEnded, a.OpsSucceeded)
		}
		note := a.Error
		if a.SelfExit {
			note = strings.TrimPrefix(note+"; the node had been declared dead, exited and was restarted", "; ")
		}
		fmt.Fprintf(w, "| %.1f | %s | %s | %s | %s | %s | %s | %s |\n", a.AtS, a.Action, a.Target, inflight, ended,
			opt(a.TakeoverS), opt(a.RecoveryS), note)
	}
	fmt.Fprintln(w, "\nTakeover: from a kill, SIGTERM or SIGSTOP until the last charged operation in flight on the cluster at that moment ended (an upper bound of the time to resume the work elsewhere: death detection, retry on another node, re-run, one poll interval). Recovery: from restart or SIGCONT until the process serves (a node: GET /auth/api-key on it; the S3 server: the first charged operation started after it succeeds).")
}
