package chaos

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/scripted"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// trial is one kind of fault, run several times.
type trial struct {
	id, name    string
	runs, short int
	// fault is the model's failure, if any.
	fault *modelFault
	// strike breaks something, at the moment on names, and may block
	// until the part is back.
	strike func(ctx context.Context, e *env, at strikePoint) error
	on     moment
	// failType, when set, is the error type the turn must fail with.
	failType string
	// turn is what the client asks; default: compute a product.
	turn func(e *env, job string) turnSpec
	// custom, when set, runs the whole trial run instead.
	custom func(ctx context.Context, e *env, job string) error
	// timeout bounds a run; default 5 minutes.
	timeout time.Duration
}

// moment is when a trial strikes.
type moment int

const (
	onAnswer   moment = iota // the first token of the answer
	onStart                  // as soon as the turn is started
	onApproval               // when a call waits for approval
	onFinal                  // the turn's final event
	onToolEnd                // each tool call's end
)

// turnSpec is one turn's request and the answer it must stream.
type turnSpec struct {
	agent, prompt, want string
}

// computeTurn asks for a product of two numbers taken from the job id.
func computeTurn(prefix, agentID string) func(*env, string) turnSpec {
	return func(_ *env, job string) turnSpec {
		a, b := 17+len(job)%50, 3+len(job)%7
		return turnSpec{agent: agentID, prompt: fmt.Sprintf("%scompute %d * %d", prefix, a, b),
			want: fmt.Sprintf("%d * %d = %d%s", a, b, a*b, answerTail)}
	}
}

func fetchTurn(e *env, _ string) turnSpec {
	return turnSpec{prompt: "fetch items from http://" + e.api.Addr + "/items", want: "Fetched 3 rows" + answerTail}
}

func bigTurn(e *env, _ string) turnSpec {
	return turnSpec{prompt: "fetch items from http://" + e.api.Addr + "/big", want: "Too much data: over 10485760 bytes" + answerTail}
}

func hurryTurn(_ *env, _ string) turnSpec {
	return turnSpec{prompt: "hurry for 3000 ms", want: "Gave up: no answer within 1s" + answerTail}
}

func workTurn(_ *env, _ string) turnSpec {
	return turnSpec{prompt: "work for 1500 ms", want: "Done: worked for 1500 ms" + answerTail}
}

func trials() []trial {
	return append([]trial{
		{id: "worker-kill", name: "SIGKILL the worker streaming the answer", runs: 50, short: 2, strike: killStreamingWorker},
		{id: "gateway-kill", name: "SIGKILL the gateway a client streams from", runs: 10, short: 1, strike: killGateway},
		{id: "pg-2s", name: "restart PostgreSQL mid-turn (2 s down)", runs: 10, short: 1, strike: restart(devstack.ServicePostgres, 2*time.Second)},
		{id: "pg-60s", name: "restart PostgreSQL mid-turn (60 s down)", runs: 1, short: 0, strike: restart(devstack.ServicePostgres, time.Minute)},
		{id: "temporal", name: "restart the Temporal server mid-turn", runs: 3, short: 1, strike: restart(devstack.ServiceTemporal, time.Second)},
		{id: "model-429", name: "model 429 with Retry-After", runs: 5, short: 1,
			fault: &modelFault{rule: "answer", fault: scripted.Fault{Status: 429, RetryAfterSec: 1, Message: "slow down"}}},
		{id: "model-500", name: "model 500", runs: 5, short: 1,
			fault: &modelFault{rule: "call", fault: scripted.Fault{Status: 500}}},
		{id: "model-cut", name: "model stream cut mid-way", runs: 5, short: 1,
			fault: &modelFault{rule: "answer", fault: scripted.Fault{CutAfterChunks: 10}}},
		{id: "model-400", name: "model 400 (fails as ModelRejected)", runs: 3, short: 1,
			fault: &modelFault{rule: "call", fault: scripted.Fault{Status: 400, Message: "bad request", Times: -1}}, failType: "ModelRejected"},
		{id: "tool-args", name: "model sends tool arguments that are not JSON", runs: 3, short: 1, turn: computeTurn("broken ", "")},
		{id: "model-60s", name: "model thinks 60 s before answering", runs: 1, short: 0,
			fault: &modelFault{rule: "answer", delayMS: 60_000}},
		{id: "api-down", name: "tool's HTTP API down, then back", runs: 3, short: 1, turn: fetchTurn, on: onStart, strike: apiDown},
		{id: "api-big", name: "tool's HTTP API answers 11 MiB (over the egress limit)", runs: 3, short: 1, turn: bigTurn},
		{id: "tool-slow", name: "tool slower than its timeout (MCP, timeout_sec 1)", runs: 3, short: 1, turn: hurryTurn},
		{id: "mcp-kill", name: "MCP server killed mid-call", runs: 3, short: 1, turn: workTurn, on: onStart, strike: killMCP},
		{id: "conv-roll", name: "conversation continued-as-new while a worker dies", runs: 2, short: 1, custom: conversationRoll},
		{id: "mcp-gateway-kill", name: "SIGKILL the gateway an MCP client calls through", runs: 3, short: 1, custom: mcpGatewayKill},
		{id: "nexus-faults", name: "a turn started through the Nexus service survives a killed worker and a restarted Temporal server: the caller's operation gets the one result", runs: 3, short: 1,
			custom: nexusFaults},
		{id: "approval-down", name: "approval decided while every worker is down", runs: 3, short: 1,
			turn: computeTurn("", "ops"), on: onApproval, strike: approveWhileDown},
		// 60 calls in the short run (longturn.go).
		{id: "long-turn", name: "a 1,000-call turn survives a killed worker and a restarted Temporal server", runs: 1, short: 1,
			custom: longTurn, timeout: 45 * time.Minute},
		// 200 documents in the short run (ingest.go).
		{id: "ingest-kill", name: "SIGKILL a worker during a 2,000-document ingest: every document once", runs: 1, short: 1,
			custom: ingestKill, timeout: 15 * time.Minute},
		// 12 calls in the short run (programkill.go).
		{id: "program-kill", name: "SIGKILL the worker mid-program (40 sequential calls): the API sees each call once", runs: 3, short: 1,
			custom: programKill, timeout: 5 * time.Minute},
		// 1 turn in the short run (writes.go).
		{id: "writes-kill", name: "SIGKILL the worker of a turn of 3-8 writes to an API that deduplicates nothing: none delivered twice", runs: writesRuns, short: writesRunsShort,
			custom: writesKill, timeout: 5 * time.Minute},
		{id: "program-writes-kill", name: "SIGKILL the worker mid-program calling an API that deduplicates nothing: the call in flight is not sent again", runs: 3, short: 1,
			custom: programWritesKill, timeout: 5 * time.Minute},
		{id: "writes-partition", name: "cut the worker of a turn of 3-8 writes off from Temporal, then let it back: none delivered twice", runs: writesRuns, short: writesRunsShort,
			custom: writesPartition, timeout: 5 * time.Minute},
		// 60 turns in the short run (replay.go).
		{id: "replay-kill", name: "SIGKILL a worker replaying 1,000 recorded turns: the report is the undisturbed one's, no tool called", runs: 1, short: 1,
			custom: replayKill, timeout: 45 * time.Minute},
	}, doorTrials()...)
}

// strikePoint is where the turn is when a trial strikes.
type strikePoint struct {
	workflowID string
	gateway    int           // the gateway the client reads from
	call       *pb.ToolEvent // onApproval: the call that waits
	run        *turnRun      // the client's reading of the turn
}

// turnRun is one turn as a client sees it.
type turnRun struct {
	job, workflowID string
	gateway         int // the gateway the client reads from now
	last            int64
	tokens          map[int64]string // by event index, for voiding
	content         string           // the text of the last content block
	status          pb.Status
	errType         string
	resumed         int // times the stream broke and went on from another gateway
	// hop, set by a trial, has the client let go of its stream after the
	// event at hand and go on from the other gateway.
	hop bool
	// killedAt is when a strike killed the worker (unix ns; 0: none), set
	// from the strike's goroutine; lastAt is when the client read its
	// latest event, and pause the longest it waited for an event after
	// the kill (from the kill, or from the latest event when that came
	// after it): how long the answer froze.
	killedAt atomic.Int64
	lastAt   time.Time
	pause    time.Duration
}

// read notes that the client read an event now.
func (r *turnRun) read(now time.Time) {
	if k := r.killedAt.Load(); k != 0 && now.UnixNano() > k {
		r.pause = max(r.pause, now.Sub(time.Unix(0, max(k, r.lastAt.UnixNano()))))
	}
	r.lastAt = now
}

// take records the event the client read as the run's latest (its text,
// status, content or error) and tells at of the moment it marks.
func (r *turnRun) take(ev *pb.StreamEvent, at func(moment, *pb.ToolEvent)) {
	idx := r.last
	switch {
	case ev.GetToken() != nil:
		r.tokens[idx] = ev.GetToken().GetText()
		at(onAnswer, nil)
	case ev.GetApprovalRequired() != nil:
		at(onApproval, ev.GetApprovalRequired())
	case ev.GetToolEnd() != nil:
		at(onToolEnd, ev.GetToolEnd())
	case ev.GetStatus() != nil:
		s := ev.GetStatus()
		if s.GetStatus() == pb.Status_STATUS_RETRYING && s.GetVoidFrom() > 0 {
			for i := range r.tokens {
				if i >= s.GetVoidFrom() {
					delete(r.tokens, i)
				}
			}
		}
		r.status = s.GetStatus()
	case ev.GetContent() != nil:
		var block struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal([]byte(ev.GetContent().GetBlockJson()), &block)
		r.content = block.Text
	case ev.GetError() != nil:
		r.errType = ev.GetError().GetError().GetType()
	}
}

// errHop is how a stream ends when the client lets go of it (turnRun.hop).
var errHop = errors.New("the client let go of the stream")

// runOnce runs one turn under the trial's fault and checks the promises.
func (e *env) runOnce(ctx context.Context, tr trial, job string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(tr.timeout, 5*time.Minute))
	defer cancel()
	e.model.Store(scripted.New(script(tr.fault), scripted.Options{}))
	if tr.custom != nil {
		begin := time.Now()
		err := tr.custom(ctx, e, job)
		return time.Since(begin), err
	}
	turn := computeTurn("", "")
	if tr.turn != nil {
		turn = tr.turn
	}
	spec := turn(e, job)

	begin := time.Now()
	run := &turnRun{job: job, workflowID: contract.TurnWorkflowID(tenant, job), tokens: map[int64]string{}}
	struck := make(chan error, 1)
	fired := false
	fire := func(m moment, call *pb.ToolEvent) {
		if fired || (m != tr.on && m != onFinal) {
			return
		}
		fired = true
		if tr.strike == nil || m == onFinal {
			struck <- nil
			return
		}
		at := strikePoint{workflowID: run.workflowID, gateway: run.gateway, call: call, run: run}
		go func() { struck <- tr.strike(ctx, e, at) }()
	}
	if tr.on == onStart {
		fire(onStart, nil)
	}
	err := e.stream(ctx, run, &pb.TurnRequest{JobId: job, SessionId: job, AgentId: spec.agent, Prompt: spec.prompt}, fire)
	took := time.Since(begin)
	if err != nil {
		return took, err
	}
	select {
	case err := <-struck:
		if err != nil {
			return took, fmt.Errorf("strike: %w", err)
		}
	case <-ctx.Done():
		return took, ctx.Err()
	}
	e.paused(run)
	return took, e.check(ctx, tr, run, spec, true)
}

// stream follows the turn from start to its final event, resuming on the
// other gateway (or the same, once back) after the last event it has
// whenever its stream breaks, or the trial has it let go (run.hop). at is
// told of the moments a trial may strike at, and of the final event
// (onFinal).
func (e *env) stream(ctx context.Context, run *turnRun, req *pb.TurnRequest, at func(moment, *pb.ToolEvent)) error {
	actx := e.auth(ctx)
	started := req == nil // nil: follow a turn started elsewhere
	for {
		c := pb.NewAgentServiceClient(e.conns[run.gateway])
		var st interface {
			Recv() (*pb.StreamEvent, error)
		}
		sctx, drop := context.WithCancel(actx)
		var err error
		if !started {
			st, err = c.Stream(sctx, &pb.StreamRequest{Turn: req})
		} else {
			st, err = c.Resume(sctx, &pb.ResumeRequest{StreamId: run.workflowID, AfterIndex: run.last})
		}
		for err == nil {
			var ev *pb.StreamEvent
			ev, err = st.Recv()
			if err != nil {
				break
			}
			started = true
			run.read(time.Now())
			idx := ev.GetMeta().GetEventIndex()
			if idx != run.last+1 {
				drop()
				return fmt.Errorf("event %d after event %d: the stream has a gap or a duplicate", idx, run.last)
			}
			run.last = idx
			run.take(ev, at)
			if run.hop {
				run.hop, err = false, errHop
			}
		}
		drop()
		if errors.Is(err, io.EOF) && terminal(run.status) {
			at(onFinal, nil) // releases a trial whose moment never came
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("turn did not end: %w (last event %d, status %s, last error %v)", ctx.Err(), run.last, run.status, err)
		}
		// The stream broke: go on from the last event, from the other
		// gateway. A start that failed before any event is made again:
		// the same job id makes it idempotent.
		run.gateway = (run.gateway + 1) % len(e.conns)
		run.resumed++
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

func terminal(s pb.Status) bool {
	return s == pb.Status_STATUS_COMPLETED || s == pb.Status_STATUS_FAILED || s == pb.Status_STATUS_CANCELED
}

// check verifies what the turn left behind.
func (e *env) check(ctx context.Context, tr trial, run *turnRun, spec turnSpec, ownSession bool) error {
	want := spec.want
	if tr.failType != "" {
		if run.status != pb.Status_STATUS_FAILED || run.errType != tr.failType {
			return fmt.Errorf("turn ended %s (%s), want FAILED with %s", run.status, run.errType, tr.failType)
		}
	} else {
		if run.status != pb.Status_STATUS_COMPLETED {
			return fmt.Errorf("turn ended %s (%s), want COMPLETED", run.status, run.errType)
		}
		if got := answerText(run); got != want {
			return fmt.Errorf("streamed answer %q, want %q", got, want)
		}
		if run.content != want {
			return fmt.Errorf("content block %q, want %q", run.content, want)
		}
	}
	var results int
	if err := e.db.QueryRow(ctx, `SELECT count(*) FROM agent_results WHERE tenant_id = $1 AND job_id = $2`, tenant, run.job).Scan(&results); err != nil {
		return fmt.Errorf("count results: %w", err)
	}
	if results != 1 {
		return fmt.Errorf("%d agent_results rows for the job, want 1", results)
	}
	if tr.on == onApproval {
		var n int
		var outcome string
		if err := e.db.QueryRow(ctx, `SELECT count(*), min(outcome) FROM approvals WHERE tenant_id = $1 AND job_id = $2`, tenant, run.job).Scan(&n, &outcome); err != nil {
			return fmt.Errorf("read approvals: %w", err)
		}
		if n != 1 || outcome != "approved" {
			return fmt.Errorf("%d approval decisions (%s), want one, approved", n, outcome)
		}
	}
	if tr.failType == "" && ownSession {
		// The exchange (prompt and answer), once.
		got, err := e.transcript(ctx, run.job)
		if err != nil {
			return err
		}
		if len(got) != 2 || got[0] != "user: "+spec.prompt || got[1] != "assistant: "+want {
			return fmt.Errorf("transcript %q, want the prompt and the answer once each", got)
		}
	}
	return nil
}

// transcript is a session's messages as "role: content" lines.
func (e *env) transcript(ctx context.Context, session string) ([]string, error) {
	rows, err := e.db.Query(ctx, `SELECT message->>'role', message->>'content' FROM session_messages WHERE tenant_id = $1 AND session_id = $2 ORDER BY seq`, tenant, session)
	if err != nil {
		return nil, fmt.Errorf("read transcript: %w", err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var role, content string
		if err := rows.Scan(&role, &content); err != nil {
			return nil, err
		}
		got = append(got, role+": "+strings.TrimSpace(content))
	}
	return got, rows.Err()
}

// answerText is the streamed text of the last step, less voided tokens.
func answerText(run *turnRun) string {
	var b strings.Builder
	for i := int64(1); i <= run.last; i++ {
		b.WriteString(run.tokens[i])
	}
	return strings.TrimSpace(b.String())
}

// quiet drops the SDK client's log lines.
type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}

// dumpEvents bounds what dump shows of a log: its last events.
const dumpEvents = 60

// dump is the turn's event log as a fresh client reads it (its last
// dumpEvents events), for a failed run's report.
func (e *env) dump(ctx context.Context, job string) string {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var b strings.Builder
	for gw := range e.conns {
		var lines []string
		read := 0
		st, err := pb.NewAgentServiceClient(e.conns[gw]).Resume(e.auth(ctx), &pb.ResumeRequest{StreamId: contract.TurnWorkflowID(tenant, job)})
		for err == nil {
			var ev *pb.StreamEvent
			if ev, err = st.Recv(); err == nil {
				read++
				lines = append(lines, strings.ReplaceAll(ev.String(), "\n", " "))
				if len(lines) > dumpEvents {
					lines = lines[1:]
				}
			}
		}
		fmt.Fprintf(&b, "event log read through gateway %d (%d events, the last %d shown):\n", gw+1, read, len(lines))
		for _, l := range lines {
			fmt.Fprintf(&b, "  %s\n", l)
		}
		fmt.Fprintf(&b, "  (%v)\n", err)
	}
	return b.String()
}
