package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/topology"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// trial is one kind of fault, run several times.
type trial struct {
	id, name    string
	runs, short int
	// fault is the model's failure, if any.
	fault *modelFault
	// strike breaks something once the answer streams (its first token
	// event); it may block until the part is back.
	strike func(ctx context.Context, e *env, run *turnRun) error
	// failType, when set, is the error type the turn must fail with.
	failType string
}

func trials() []trial {
	return []trial{
		{id: "worker-kill", name: "SIGKILL the worker streaming the answer", runs: 50, short: 2, strike: killStreamingWorker},
		{id: "gateway-kill", name: "SIGKILL the gateway a client streams from", runs: 10, short: 1, strike: killGateway},
		{id: "pg-2s", name: "restart PostgreSQL mid-turn (2 s down)", runs: 3, short: 1, strike: restart(devstack.ServicePostgres, 2*time.Second)},
		{id: "pg-60s", name: "restart PostgreSQL mid-turn (60 s down)", runs: 1, short: 0, strike: restart(devstack.ServicePostgres, time.Minute)},
		{id: "temporal", name: "restart the Temporal server mid-turn", runs: 3, short: 1, strike: restart(devstack.ServiceTemporal, time.Second)},
		{id: "model-429", name: "model 429 with Retry-After", runs: 5, short: 1,
			fault: &modelFault{rule: "answer", fault: scripted.Fault{Status: 429, RetryAfterSec: 1, Message: "slow down"}}},
		{id: "model-500", name: "model 500", runs: 5, short: 1,
			fault: &modelFault{rule: "call", fault: scripted.Fault{Status: 500}}},
		{id: "model-cut", name: "model stream cut mid-way", runs: 5, short: 1,
			fault: &modelFault{rule: "answer", fault: scripted.Fault{CutAfterChunks: 10}}},
		{id: "model-400", name: "model 400 (fails as model_rejected)", runs: 3, short: 1,
			fault: &modelFault{rule: "call", fault: scripted.Fault{Status: 400, Message: "bad request", Times: -1}}, failType: "ModelRejected"},
	}
}

// turnRun is one turn as a client sees it.
type turnRun struct {
	job, workflowID string
	gateway         int // the gateway the client reads from now
	last            int64
	tokens          map[int64]string // by event index, for voiding
	status          pb.Status
	errType         string
	resumes         int
}

// runOnce runs one turn under the trial's fault and checks the promises.
func (e *env) runOnce(ctx context.Context, tr trial, job string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	e.model.Store(scripted.New(script(tr.fault), scripted.Options{}))
	a, b := 17+len(job)%50, 3+len(job)%7
	prompt := fmt.Sprintf("compute %d * %d", a, b)
	want := fmt.Sprintf("%d * %d = %d%s", a, b, a*b, answerTail)

	begin := time.Now()
	run := &turnRun{job: job, workflowID: contract.TurnWorkflowID(tenant, job), tokens: map[int64]string{}}
	struck := make(chan error, 1)
	err := e.stream(ctx, run, &pb.TurnRequest{JobId: job, SessionId: job, Prompt: prompt}, func() {
		if tr.strike == nil {
			struck <- nil
			return
		}
		go func() { struck <- tr.strike(ctx, e, run) }()
	})
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
	return took, e.check(ctx, tr, run, want)
}

// stream follows the turn from start to its final event, resuming on the
// other gateway (or the same, once back) after the last event it has
// whenever its stream breaks. onAnswer runs at the first token event.
func (e *env) stream(ctx context.Context, run *turnRun, req *pb.TurnRequest, onAnswer func()) error {
	actx := e.auth(ctx)
	started := false
	answered := false
	for attempt := 0; ; attempt++ {
		c := pb.NewAgentServiceClient(e.conns[run.gateway])
		var st interface {
			Recv() (*pb.StreamEvent, error)
		}
		var err error
		if !started {
			st, err = c.Stream(actx, &pb.StreamRequest{Turn: req})
		} else {
			st, err = c.Resume(actx, &pb.ResumeRequest{StreamId: run.workflowID, AfterIndex: run.last})
		}
		for err == nil {
			var ev *pb.StreamEvent
			ev, err = st.Recv()
			if err != nil {
				break
			}
			started = true
			idx := ev.GetMeta().GetEventIndex()
			if idx != run.last+1 {
				return fmt.Errorf("event %d after event %d: the stream has a gap or a duplicate", idx, run.last)
			}
			run.last = idx
			switch {
			case ev.GetToken() != nil:
				run.tokens[idx] = ev.GetToken().GetText()
				if !answered {
					answered = true
					onAnswer()
				}
			case ev.GetStatus() != nil:
				s := ev.GetStatus()
				if s.GetStatus() == pb.Status_STATUS_RETRYING && s.GetVoidFrom() > 0 {
					for i := range run.tokens {
						if i >= s.GetVoidFrom() {
							delete(run.tokens, i)
						}
					}
				}
				run.status = s.GetStatus()
			case ev.GetError() != nil:
				run.errType = ev.GetError().GetError().GetType()
			}
		}
		if errors.Is(err, io.EOF) && terminal(run.status) {
			if !answered {
				onAnswer() // a turn that failed before answering
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("turn did not end: %w (last event %d, status %s, last error %v)", ctx.Err(), run.last, run.status, err)
		}
		// The stream broke: go on from the last event, from the other
		// gateway.
		run.resumes++
		run.gateway = (run.gateway + 1) % len(e.conns)
		if !started && attempt > 0 {
			// The start itself failed; starting again with the same job
			// id is idempotent.
			started = false
		}
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
func (e *env) check(ctx context.Context, tr trial, run *turnRun, want string) error {
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
	}
	var results int
	if err := e.db.QueryRow(ctx, `SELECT count(*) FROM agent_results WHERE tenant_id = $1 AND job_id = $2`, tenant, run.job).Scan(&results); err != nil {
		return fmt.Errorf("count results: %w", err)
	}
	if results != 1 {
		return fmt.Errorf("%d agent_results rows for the job, want 1", results)
	}
	if tr.failType == "" {
		// The exchange (prompt and answer), once.
		rows, err := e.db.Query(ctx, `SELECT message->>'role', message->>'content' FROM session_messages WHERE tenant_id = $1 AND session_id = $2 ORDER BY seq`, tenant, run.job)
		if err != nil {
			return fmt.Errorf("read transcript: %w", err)
		}
		var got []string
		for rows.Next() {
			var role, content string
			if err := rows.Scan(&role, &content); err != nil {
				return err
			}
			got = append(got, role+": "+strings.TrimSpace(content))
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(got) != 2 || !strings.HasPrefix(got[0], "user: compute") || got[1] != "assistant: "+want {
			return fmt.Errorf("transcript %q, want the prompt and the answer once each", got)
		}
	}
	return nil
}

// answerText is the streamed text of the last step, less voided tokens.
func answerText(run *turnRun) string {
	var b strings.Builder
	for i := int64(1); i <= run.last; i++ {
		b.WriteString(run.tokens[i])
	}
	return strings.TrimSpace(b.String())
}

// killStreamingWorker kills the worker running the turn's model call and
// starts it again a moment later.
func killStreamingWorker(ctx context.Context, e *env, run *turnRun) error {
	p, err := e.activityWorker(ctx, run.workflowID)
	if err != nil {
		return err
	}
	if err := p.Kill(); err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond)
	return p.Start(ctx)
}

// activityWorker finds the worker process running the workflow's pending
// activity, by the pid in its Temporal identity ("pid@host@").
func (e *env) activityWorker(ctx context.Context, workflowID string) (*topology.Process, error) {
	c, err := client.DialContext(ctx, client.Options{HostPort: e.top.Stack.TemporalAddress, Namespace: e.top.Stack.Namespace, Logger: quiet{}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	for range 50 {
		d, err := c.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
			Namespace: e.top.Stack.Namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: workflowID},
		})
		if err != nil {
			return nil, err
		}
		for _, a := range d.GetPendingActivities() {
			pid, _, _ := strings.Cut(a.GetLastWorkerIdentity(), "@")
			n, _ := strconv.Atoi(pid)
			for _, p := range e.top.Workers {
				if p.PID() == n && n != 0 {
					return p, nil
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, errors.New("no worker process runs the turn's activity")
}

// killGateway kills the gateway the client reads from; the client goes on
// from the other one. The killed one starts again a moment later.
func killGateway(ctx context.Context, e *env, run *turnRun) error {
	p := e.top.Gateways[run.gateway]
	if err := p.Kill(); err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond)
	return p.Start(ctx)
}

func restart(service string, down time.Duration) func(context.Context, *env, *turnRun) error {
	return func(ctx context.Context, e *env, _ *turnRun) error {
		return e.top.Stack.Restart(ctx, service, down)
	}
}

// quiet drops the SDK client's log lines.
type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}
