package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/checker"
)

// clusterTrial is one fault of the cluster trials, made while the
// workload runs.
type clusterTrial struct {
	id, name string
	// short says the trial runs in `go tool task test` too.
	short bool
	// strike makes the fault and returns when it was made and healed (a
	// fault without a heal leaves Healed zero).
	strike func(ctx context.Context, e *clusterEnv) (checker.Fault, error)
	// mend, when set, readies the cluster for the next trial.
	mend func(ctx context.Context, e *clusterEnv) error
	// catch, on the checker's own trial, are the violations the checker
	// must find: the workload switches the at-most-once protection off
	// and has a client drop an event.
	catch []checker.Kind
	// big has the turns fetch a large report, which the object store keeps.
	big bool
}

// partitionFor is how long a partition lasts: past a call's heartbeat
// timeout and a workflow task's, so that Temporal hands the work of a
// cut-off worker to another while the first still runs.
const clusterPartition = 20 * time.Second

func clusterTrials() []clusterTrial {
	return []clusterTrial{
		{id: "worker-temporal", name: "a worker partitioned from Temporal mid-tool, healed after 20 s", short: true,
			strike: cutMidWrite("worker-1")},
		{id: "checker-catches", name: "the checker's own: protection off, a worker killed mid-write; an event dropped", short: true,
			strike: killMidWrite, catch: []checker.Kind{checker.DuplicateWrite, checker.Gap}},
		{id: "worker-pg", name: "a worker partitioned from PostgreSQL, healed after 20 s", strike: cutLink("worker-1", "pg")},
		{id: "gateway-pg", name: "a gateway partitioned from PostgreSQL, healed after 20 s", strike: cutLink("gateway-1", "pg")},
		{id: "gateway-temporal", name: "a gateway partitioned from Temporal, healed after 20 s", strike: cutLink("gateway-1", "temporal")},
		{id: "worker-halfopen", name: "a worker's connections to Temporal half-open (what Temporal sends is lost), healed after 20 s",
			strike: halfOpen("worker-2")},
		{id: "client-gateway", name: "the clients partitioned from the gateways mid-stream, healed after 20 s", strike: cutLink("client", "gateways")},
		{id: "latency", name: "200 ms between the workers and Temporal, connections reset every 10 s", strike: slowWorkers},
		{id: "s3-down", name: "the S3 host down for a minute during large results", strike: cutHost("s3", time.Minute), big: true},
		{id: "history-kill", name: "a Temporal history host killed", strike: killHistory, mend: restartHistory},
		{id: "pg-failover", name: "PostgreSQL failed over to its standby under load", short: true, strike: failover},
	}
}

// cutLink partitions host from server for clusterPartition.
func cutLink(host, server string) func(context.Context, *clusterEnv) (checker.Fault, error) {
	return func(ctx context.Context, e *clusterEnv) (checker.Fault, error) {
		k := e.c.Links.Get(host, server)
		if k == nil {
			return checker.Fault{}, fmt.Errorf("no link %s>%s", host, server)
		}
		f := checker.Fault{Injected: time.Now()}
		if err := k.Cut(); err != nil {
			return f, err
		}
		sleep(ctx, clusterPartition)
		f.Healed = time.Now()
		return f, k.Heal()
	}
}

// cutMidWrite partitions host from Temporal the moment it sends a write
// to the journal, so that the write is in flight, for clusterPartition:
// Temporal times the call out and retries it on another worker while the
// first, a zombie, still waits for its answer.
func cutMidWrite(host string) func(context.Context, *clusterEnv) (checker.Fault, error) {
	return func(ctx context.Context, e *clusterEnv) (checker.Fault, error) {
		k := e.c.Links.Get(host, "temporal")
		if k == nil {
			return checker.Fault{}, fmt.Errorf("no link %s>temporal", host)
		}
		if err := e.atWrite(host, k.Cut); err != nil {
			return checker.Fault{}, err
		}
		f := checker.Fault{Injected: time.Now()}
		sleep(ctx, clusterPartition)
		f.Healed = time.Now()
		return f, k.Heal()
	}
}

// atWrite waits for host's next write to the journal and does act as it
// arrives, before the journal counts it: the write is then in flight.
func (e *clusterEnv) atWrite(host string, act func() error) error {
	h := e.c.Host(host)
	if h == nil {
		return fmt.Errorf("no host %s", host)
	}
	done := make(chan error, 1)
	var once sync.Once
	tap := func(from string) {
		if from == h.Addr.String() {
			once.Do(func() { done <- act() })
		}
	}
	e.tap.Store(&tap)
	defer e.tap.Store(nil)
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		return fmt.Errorf("%s sent no write within a minute", host)
	}
}

// halfOpen drops what Temporal sends to host, for clusterPartition,
// while what host sends still arrives: connections open at one end
// only, as a one-way loss leaves them.
func halfOpen(host string) func(context.Context, *clusterEnv) (checker.Fault, error) {
	return func(ctx context.Context, e *clusterEnv) (checker.Fault, error) {
		k := e.c.Links.Get(host, "temporal")
		if k == nil {
			return checker.Fault{}, fmt.Errorf("no link %s>temporal", host)
		}
		f := checker.Fault{Injected: time.Now()}
		if err := k.CutOneWay(); err != nil {
			return f, err
		}
		sleep(ctx, clusterPartition)
		f.Healed = time.Now()
		return f, k.Heal()
	}
}

// cutHost takes host's link down for d: it reaches nothing and nothing
// reaches it.
func cutHost(name string, d time.Duration) func(context.Context, *clusterEnv) (checker.Fault, error) {
	return func(ctx context.Context, e *clusterEnv) (checker.Fault, error) {
		h := e.c.Host(name)
		if h == nil {
			return checker.Fault{}, fmt.Errorf("no host %s", name)
		}
		f := checker.Fault{Injected: time.Now()}
		if err := h.Cut(ctx); err != nil {
			return f, err
		}
		sleep(ctx, d)
		f.Healed = time.Now()
		return f, h.Heal(context.WithoutCancel(ctx))
	}
}

// killMidWrite SIGKILLs worker-1 the moment it sends a write to the
// journal, the write in flight, and starts it again clusterPartition
// later. Its polls die with it, so Temporal gives the call's retry to
// another worker: with the protection off, the retry sends the write
// again.
func killMidWrite(ctx context.Context, e *clusterEnv) (checker.Fault, error) {
	p := e.c.Workers[0]
	if err := e.atWrite("worker-1", p.Kill); err != nil {
		return checker.Fault{}, err
	}
	f := checker.Fault{Injected: time.Now()}
	sleep(ctx, clusterPartition)
	f.Healed = time.Now()
	return f, p.Start(ctx)
}

// slowWorkers puts 200 ms (±20) on every worker's link to Temporal and
// resets their connections every 10 s, for 40 s.
func slowWorkers(ctx context.Context, e *clusterEnv) (checker.Fault, error) {
	links := e.c.Links.Matching("worker-", ">temporal")
	f := checker.Fault{Injected: time.Now()}
	for _, k := range links {
		if err := k.Latency(200, 20); err != nil {
			return f, err
		}
	}
	for range 4 {
		sleep(ctx, 10*time.Second)
		for _, k := range links {
			if err := k.Reset(); err != nil {
				return f, err
			}
		}
	}
	f.Healed = time.Now()
	for _, k := range links {
		if err := k.Latency(0, 0); err != nil {
			return f, err
		}
	}
	return f, nil
}

func killHistory(_ context.Context, e *clusterEnv) (checker.Fault, error) {
	p := e.c.Temporal("temporal-history-1")
	if p == nil {
		return checker.Fault{}, fmt.Errorf("no history host")
	}
	f := checker.Fault{Injected: time.Now()}
	p.Kill()
	return f, nil
}

func restartHistory(_ context.Context, e *clusterEnv) error {
	return e.c.Temporal("temporal-history-1").Start()
}

func failover(ctx context.Context, e *clusterEnv) (checker.Fault, error) {
	f := checker.Fault{Injected: time.Now()}
	return f, e.c.Failover(ctx)
}

// Each trial's workload: -cluster.clients clients start turns from
// clusterWarm before the fault until clusterAfter after it.
const (
	clusterWarm  = 5 * time.Second
	clusterAfter = 15 * time.Second
)

// runClusterTrial runs the workload, makes the trial's fault during it,
// and checks what was recorded.
func runClusterTrial(ctx context.Context, e *clusterEnv, tr clusterTrial, run string) (checker.Report, error) {
	w := newWorkload(e, run)
	w.careless, w.drop, w.big = tr.catch != nil, tr.catch != nil, tr.big
	e.log.Info("trial started", zap.String("trial", tr.id))
	defer e.log.Info("trial ended", zap.String("trial", tr.id))
	wctx, stopClients := context.WithCancel(ctx)
	pctx, stopProbe := context.WithCancel(ctx)
	began := time.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); w.drive(wctx, *clusterClients) }()
	go func() { defer wg.Done(); w.probe(pctx) }()
	sleep(ctx, clusterWarm)
	fault, err := tr.strike(ctx, e)
	sleep(ctx, clusterAfter)
	ended := time.Now()
	stopClients()
	stopProbe()
	wg.Wait()
	if err != nil {
		return checker.Report{Trial: tr.name}, fmt.Errorf("%s: fault: %w", tr.id, err)
	}
	recs, err := w.records(ctx, tr.name, fault)
	recs.Began, recs.Ended = began, ended
	if err != nil {
		return checker.Report{Trial: tr.name}, fmt.Errorf("%s: records: %w", tr.id, err)
	}
	rep := checker.Check(recs)
	if len(rep.Violations) > 0 {
		w.explain(ctx, rep)
	}
	if tr.big {
		if err := e.keptInS3(ctx, fault); err != nil {
			return rep, fmt.Errorf("%s: %w", tr.id, err)
		}
	}
	if tr.mend != nil {
		if err := tr.mend(ctx, e); err != nil {
			return rep, fmt.Errorf("%s: mend: %w", tr.id, err)
		}
	}
	return rep, nil
}

// keptInS3 checks that the turns kept their reports in the object store
// during the fault and after it: blobs written while S3 was down waited
// for it (or went to PostgreSQL), and the trial says how many did which.
func (e *clusterEnv) keptInS3(ctx context.Context, f checker.Fault) error {
	var during, after, inPG int
	err := e.db.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE object_key IS NOT NULL AND created_at BETWEEN $1 AND $2),
		count(*) FILTER (WHERE object_key IS NOT NULL AND created_at > $2),
		count(*) FILTER (WHERE object_key IS NULL AND created_at > $1)
		FROM cas_blobs WHERE size > 1000000`, f.Injected, f.Healed).Scan(&during, &after, &inPG)
	if err != nil {
		return fmt.Errorf("count blobs: %w", err)
	}
	// On stdout, beside the table.
	fmt.Printf("S3 down: %d large results kept in S3 while it was down, %d after it came back, %d in PostgreSQL since the fault\n", during, after, inPG)
	if after == 0 {
		return fmt.Errorf("no large result was kept in S3 after it came back (%d while it was down, %d in PostgreSQL)", during, inPG)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
