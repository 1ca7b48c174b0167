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
	// stop makes answer 500 until cont, and kill closes, with its connections, until restart).
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
		if a.Target == WebhookTarget && a.Kind == "term" {
			return nil, fmt.Errorf("schedule step %q: the webhook receiver is stopped (answers 500), continued, killed or restarted, not terminated", f)
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
	var logMu sync.Mutex
	go func() {
		var res result
		defer func() { resc <- res }()
		var t0 time.Time
		select {
		case t0 = <-started:
		case <-scheduleCtx.Done():
			return
		}
		res.actions, res.at = runSchedule(scheduleCtx, ctx, t0, cc.Schedule, func(ctx context.Context, a Action, ar *ActionReport) func(stop <-chan struct{}) {
			logMu.Lock()
			fmt.Fprintf(cfg.Log, "bench chaos: %s %s\n", a.Kind, a.Target)
			logMu.Unlock()
			rec, watch, err := cc.do(ctx, cfg, a, book)
			if err != nil {
				ar.Error = err.Error()
				return nil
			}
			if (a.Kind == "restart" || a.Kind == "cont") && a.Target != WebhookTarget {
				s := rec.Seconds()
				ar.RecoveryS = &s
			}
			if watch == nil {
				return nil
			}
			return func(stop <-chan struct{}) {
				selfExit, rec, err := watch(stop)
				if !selfExit {
					return
				}
				ar.SelfExit = true
				if err != nil {
					ar.Error, ar.RecoveryS = err.Error(), nil
					return
				}
				s := rec.Seconds()
				ar.RecoveryS = &s
			}
		})
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

// stepFunc performs one action of a schedule, filling ar. It may return a watch: work that goes on after the
// action (a continued node watched for exiting on its own) without holding back the next action on the same
// target. The watch ends on its own, or soon after stop is closed (the next action on the target is due);
// the next action on the target runs once it has returned.
type stepFunc func(ctx context.Context, a Action, ar *ActionReport) (watch func(stop <-chan struct{}))

// runSchedule runs schedule from t0 and returns the actions that ran and when each began. Each action starts
// at its time; only an action on the same target waits, for the one before it (a restart for its kill) and
// for that one's watch to stop. No action starts after scheduleCtx ended; an action under way then runs to its
// end under ctx.
//
// A continued node's watch (several probe intervals, about 14 s) once held back the next action on its node:
// a second freeze of a node scheduled sooner after its cont ran late and lasted 0 s (chaos12, 2026-11-28).
// Before that, a recovery being watched held back the actions on every target, and the default schedule's S3
// kill ran after the load had ended (`bench chaos` with batches, 2026-11-27).
func runSchedule(scheduleCtx, ctx context.Context, t0 time.Time, schedule []Action, step stepFunc) (actions []ActionReport, at []time.Time) {
	type slot struct {
		ar  ActionReport
		at  time.Time
		ran bool
	}
	// chain is one action's place in its target's sequence: stop asks its watch to end, ended is closed once
	// the action and its watch have.
	type chain struct{ stop, ended chan struct{} }
	slots := make([]slot, len(schedule))
	last := map[string]*chain{}
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		for _, s := range slots {
			if s.ran {
				actions, at = append(actions, s.ar), append(at, s.at)
			}
		}
	}()
	for i, a := range schedule {
		select {
		case <-scheduleCtx.Done():
			return
		case <-time.After(time.Until(t0.Add(a.At))):
		}
		before, c := last[a.Target], &chain{stop: make(chan struct{}), ended: make(chan struct{})}
		last[a.Target] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(c.ended)
			if before != nil {
				close(before.stop)
				<-before.ended
			}
			s := &slots[i]
			s.at, s.ran = time.Now(), true
			s.ar = ActionReport{AtS: s.at.Sub(t0).Seconds(), Action: a.Kind, Target: a.Target}
			if watch := step(ctx, a, &s.ar); watch != nil {
				watch(c.stop)
			}
		}()
	}
	return
}

// do performs one action and, for restart and cont, waits until the process serves again. For a node's cont
// it returns a watch (see below) to run after it.
func (cc ChaosConfig) do(ctx context.Context, cfg Config, a Action, book *jobBook) (recovery time.Duration,
	watch func(stop <-chan struct{}) (selfExit bool, recovery time.Duration, err error), err error) {
	if a.Target == WebhookTarget {
		switch a.Kind {
		case "kill":
			return 0, nil, cfg.webhooks.kill()
		case "restart":
			return 0, nil, cfg.webhooks.restart()
		}
		cfg.webhooks.setFailing(a.Kind == "stop")
		return 0, nil, nil
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
		return 0, nil, p.Kill()
	case "term":
		return 0, nil, p.Stop(rctx)
	case "stop":
		return 0, nil, p.Pause()
	case "cont":
		if err := p.Resume(); err != nil {
			return 0, nil, err
		}
	case "restart":
		if err := p.Restart(rctx); err != nil {
			return 0, nil, err
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
		return 0, nil, err
	}
	recovery = time.Since(began)
	if !continued {
		return recovery, nil, nil
	}
	// A node frozen longer than the failure detection was declared dead. Once it runs again it learns so
	// from the peers' probes and gossip, within a few probe intervals (plus what a loaded machine adds), and
	// exits: it cannot serve again under a member id the cluster removed. Serving before that proves nothing,
	// so the watch waits that long and restarts a node that exits, as a process supervisor (systemd's
	// Restart=on-failure) would; the recovery then runs until the restarted node serves. The next action on
	// the node ends the watch early (a node frozen again cannot exit meanwhile; one that exits later is seen
	// by the next cont's watch).
	fd := cc.Local.detection
	if fd.ProbeInterval <= 0 {
		fd.ProbeInterval = cluster.DefaultFailureDetection().ProbeInterval
	}
	window := began.Add(4*fd.ProbeInterval + clustertest.LoadSlack)
	return recovery, func(stop <-chan struct{}) (bool, time.Duration, error) {
		select {
		case <-p.Exited():
		case <-time.After(time.Until(window)):
			return false, 0, nil
		case <-stop:
			if !exited(p) {
				return false, 0, nil
			}
		case <-ctx.Done():
			return false, 0, nil
		}
		rctx, cancel := context.WithTimeout(ctx, cc.RecoveryTimeout)
		defer cancel()
		if err := p.Restart(rctx); err != nil {
			return true, 0, fmt.Errorf("restart after the node exited on its own: %w", err)
		}
		if err := cc.awaitServing(rctx, cfg, a, node, book); err != nil {
			return true, 0, err
		}
		return true, time.Since(began), nil
	}, nil
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
