package eventlog

import (
	"context"
	"errors"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// Read returns a page of streamID's events after index after, at most
// limit of them (0: no bound), as a reader can have them when it asks:
// the events the turn has logged and, past the log's end, what a
// live-first model call in flight has streamed — the events its followers
// have been shown, which the log will hold at the same indices
// (LiveSource.Stored). The page's Next is one past the last of all those,
// and an after beyond it is CodeInvalid. With wait above zero and no
// event after after yet, it waits up to wait for one (Follow), and
// returns the empty page when none came.
//
// It never waits on the turn itself. The events query is answered only
// between the turn's workflow tasks, and a local model call holds its
// task for the whole call. So while the query waits (joinPoll, then again
// at each), the read looks at the live path: when the turn has a
// workflow task scheduled or running, and the live path holds the stream
// from the reader's position on (a streamed turn stores what it hands its
// activities, and what its live-first calls stream, from its first
// hand-on until it ends), it answers from there: the events the turn
// handed its activities, and what its call has streamed since — behind
// the log by at most what the turn logged after its last hand-on, which
// a later read has. A task that ends sooner lets the query answer: the
// log, and what the live path holds past it.
func (f *Follower) Read(ctx context.Context, streamID string, after int64, limit int, wait time.Duration) (agent.EventsPage, error) {
	if after < 0 {
		return agent.EventsPage{}, agent.ValidateAfter(after, 0)
	}
	page, err := f.readNow(ctx, streamID, after, limit)
	// An index a reader was shown can be missing from both the log and
	// the live path for a moment while a running turn's call changes
	// hands (a local call handed off, a retry fencing the stream): look
	// again for a little while before calling it the reader's mistake.
	for tries := 0; errors.Is(err, errNotYet) && tries < notYetTries; tries++ {
		select {
		case <-time.After(joinPoll):
		case <-ctx.Done():
			return agent.EventsPage{}, ctx.Err()
		}
		page, err = f.readNow(ctx, streamID, after, limit)
	}
	if err != nil || wait <= 0 || len(page.Events) > 0 || page.Done {
		return page, err
	}
	return f.await(ctx, streamID, after, limit, wait, page)
}

// readNow is Read without the wait.
func (f *Follower) readNow(ctx context.Context, streamID string, after int64, limit int) (agent.EventsPage, error) {
	if f.hub == nil {
		page, err := f.readLog(ctx, streamID, after, limit)
		if err != nil {
			return page, err
		}
		return page, agent.ValidateAfter(after, page.Next)
	}
	// The query first: between the turn's workflow tasks, or in one that
	// ends soon, it answers at once and with everything. While it waits,
	// the live path answers, when it can (readLive).
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reads := goRead(func() (agent.EventsPage, error) { return f.readLog(rctx, streamID, after, limit) })
	tick := time.NewTicker(joinPoll)
	defer tick.Stop()
	for {
		select {
		case r := <-reads:
			if r.err != nil {
				return agent.EventsPage{}, r.err
			}
			return f.pastLog(ctx, streamID, after, limit, r.page)
		case <-tick.C:
			if page, ok := f.readLive(ctx, streamID, after, limit); ok {
				return page, nil
			}
		case <-ctx.Done():
			return agent.EventsPage{}, ctx.Err()
		}
	}
}

// readLog reads a page of the log with the events query. A turn that
// runs as another tenant than its id names is not found.
func (f *Follower) readLog(ctx context.Context, streamID string, after int64, limit int) (agent.EventsPage, error) {
	page, err := turnclient.Events(ctx, f.client, streamID, agent.EventsQuery{AfterIndex: after, Limit: limit})
	if err != nil {
		return page, err
	}
	if !ownTenant(streamID, page.TenantID) {
		return agent.EventsPage{}, agent.Errorf(agent.CodeNotFound, "stream %q not found", streamID)
	}
	return page, nil
}

// pastLog adds to a page of the log what the live path holds past the
// log's end, when the page reaches it, and checks after against the end
// of both.
func (f *Follower) pastLog(ctx context.Context, streamID string, after int64, limit int, page agent.EventsPage) (agent.EventsPage, error) {
	reached := after
	if n := len(page.Events); n > 0 {
		reached = page.Events[n-1].Index
	}
	// A page of an earlier run (a turn that continued as new) ends before
	// the log does, and a page cut at limit before the log's end: neither
	// reaches what follows the log.
	if !page.Done && reached >= page.Next-1 && (limit == 0 || len(page.Events) < limit) {
		stored, err := f.hub.Stored(ctx, streamID, page.Next-1)
		if err != nil {
			if ctx.Err() != nil {
				return agent.EventsPage{}, ctx.Err()
			}
			// It costs only freshness: the log will hold them.
			f.logger.Warn("reading stored stream events failed", "stream_id", streamID, "error", err)
		}
		stored = continuing(stored, page.Next)
		if len(stored) > 0 {
			page.Next = stored[len(stored)-1].Index + 1
		}
		addAfter(&page, stored, after, limit)
	}
	if err := agent.ValidateAfter(after, page.Next); err != nil {
		if !page.Done {
			return agent.EventsPage{}, notYet{err}
		}
		return agent.EventsPage{}, err
	}
	return page, nil
}

// notYetTries bounds Read's looks again at a running turn's stream whose
// end is before the reader's position: 40 × joinPoll, 2 s.
const notYetTries = 40

// errNotYet marks a read past the end of a running turn's stream
// (notYet), which Read looks at again.
var errNotYet = errors.New("not yet")

// notYet is the reader's CodeInvalid error, which Read returns as it is
// once it stops looking; errors.Is finds errNotYet in it.
type notYet struct{ error }

func (n notYet) Is(target error) bool { return target == errNotYet }

func (n notYet) Unwrap() error { return n.error }

// readLive answers from the live path, when it holds the stream from the
// reader's position on (the event at after, or the first) and the turn
// has a workflow task scheduled or running, which a query would wait for.
// Between tasks the log may hold events no activity has been handed yet
// (a turn waiting for a decision): the log answers then.
func (f *Follower) readLive(ctx context.Context, streamID string, after int64, limit int) (agent.EventsPage, bool) {
	from := max(after, 1)
	stored, err := f.hub.Stored(ctx, streamID, from-1)
	if err != nil {
		if ctx.Err() == nil {
			f.logger.Warn("reading stored stream events failed", "stream_id", streamID, "error", err)
		}
		return agent.EventsPage{}, false
	}
	stored = continuing(stored, from)
	if len(stored) == 0 {
		return agent.EventsPage{}, false
	}
	tenant, busy := f.inTask(ctx, streamID)
	if !busy || !ownTenant(streamID, tenant) {
		// Between tasks, or not the caller's to read: the query says
		// what the log holds, or what is wrong.
		return agent.EventsPage{}, false
	}
	page := agent.EventsPage{TenantID: tenant, Next: stored[len(stored)-1].Index + 1}
	addAfter(&page, stored, after, limit)
	return page, true
}

// inTask describes the turn's workflow: the tenant it runs as (its
// AgentflowTenant search attribute, "" when it has none), and whether it
// is running with a workflow task scheduled or started.
func (f *Follower) inTask(ctx context.Context, streamID string) (string, bool) {
	desc, err := f.client.DescribeWorkflowExecution(ctx, streamID, "")
	if err != nil {
		return "", false // the query says what is wrong
	}
	info := desc.GetWorkflowExecutionInfo()
	var tenant string
	if p := info.GetSearchAttributes().GetIndexedFields()[contract.SearchTenant.GetName()]; p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &tenant)
	}
	return tenant, info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && desc.GetPendingWorkflowTask() != nil
}

// ownTenant reports whether a turn that runs as tenant (when known) is
// the one its stream id names.
func ownTenant(streamID, tenant string) bool {
	named, err := agent.StreamTenant(streamID)
	return tenant == "" || err != nil || named == tenant
}

// continuing returns the run of evs that continues a stream at index
// from, each index once, up to the first gap.
func continuing(evs []agent.Event, from int64) []agent.Event {
	var out []agent.Event
	for _, e := range evs {
		switch {
		case e.Index < from:
			continue
		case e.Index > from:
			return out
		}
		out = append(out, e)
		from++
	}
	return out
}

// await waits up to wait for the events after index after, following the
// stream, and returns what arrived first; page, the empty read, when
// nothing did.
func (f *Follower) await(ctx context.Context, streamID string, after int64, limit int, wait time.Duration, page agent.EventsPage) (agent.EventsPage, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var got []agent.Event
	err := f.Follow(wctx, streamID, after, func(e agent.Event) error {
		// The rest of what arrived with it is sent before Follow
		// returns: the page takes it all.
		got = append(got, e)
		cancel()
		return nil
	})
	switch {
	case len(got) > 0:
	case ctx.Err() != nil:
		return agent.EventsPage{}, ctx.Err()
	case err != nil && wctx.Err() == nil:
		return agent.EventsPage{}, err
	default:
		return page, nil // the wait ended with nothing new
	}
	out := agent.EventsPage{TenantID: page.TenantID, Next: got[len(got)-1].Index + 1}
	for _, e := range got {
		if limit > 0 && len(out.Events) == limit {
			break
		}
		out.Events = append(out.Events, e)
		out.Done = e.Terminal()
	}
	return out, nil
}

// addAfter appends to p the events of stored after the reader's
// position, up to limit (0: no limit), stopping at the stream's end.
func addAfter(p *agent.EventsPage, stored []agent.Event, after int64, limit int) {
	for _, e := range stored {
		if e.Index <= after {
			continue
		}
		if limit > 0 && len(p.Events) == limit {
			return
		}
		p.Events = append(p.Events, e)
		if e.Terminal() {
			p.Done = true
			return
		}
	}
}
