package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/nodeclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// Every door under faults: the two faults the gRPC stream is put through
// (the worker streaming the answer killed, the gateway the client streams
// from killed), on each of the gateway's other doors, read by that
// protocol's own client. The client reaches the gateways through a
// balancer (mcp.go), as it would in production: when its gateway dies the
// balancer cuts its connections and sends the next ones to the other
// gateway, and the client goes on there as its protocol says (resumes
// after the last event it has, resubscribes, or sends the same request
// again).
//
// A fault is struck when the turn's log shows the answer's first token,
// read by an observer over gRPC from the gateway the client does not use.
// Each run then checks what the door promises: the client read no event,
// delta or chunk twice and missed none (in the protocol's terms: each
// door's client says what it saw), the text it ends with is the turn's
// stored result, which is the model's answer, once; there is one result
// for the job; and when the door used a session, its transcript holds the
// exchange once.

// door is one protocol of the gateway, with its client.
type door struct {
	id, name string
	// workerRuns and gatewayRuns are the full counts of its two trials.
	workerRuns, gatewayRuns int
	// client streams the turn through the door to its end.
	client func(ctx context.Context, e *env, c doorCall) (doorRead, error)
	// node: the client runs on Node.js (doors_node.go).
	node bool
}

// doorCall is what a door's client is asked: a turn of the calc agent.
type doorCall struct {
	// base is the balancer's URL (http://host:port), in front of the
	// gateways' HTTP API.
	base string
	// job is a fresh id, for the door to use as its job, session, chat,
	// run or context id, whichever it takes from a client.
	job    string
	prompt string
}

// doorRead is what the client read.
type doorRead struct {
	// job is the turn's job id, when the client learns it ("" when the
	// protocol does not say).
	job string
	// session is the session the door sent the message to, "" for none.
	session string
	// text is the answer the client ends with.
	text string
	// flaws are the duplicates and gaps the client saw, in its
	// protocol's terms: a run passes with none.
	flaws []string
	// resumed counts the client's resumptions (or requests sent again).
	resumed int
}

// doors are the gateway's doors put through the faults, each with its
// protocol's own client (doors_*.go). gRPC has trials of its own
// (trials.go), and MCP's gateway kill is mcp-gateway-kill.
func doors() []door {
	return []door{
		{id: "sse", name: "SSE", workerRuns: 10, gatewayRuns: 5, client: sseClient},
		{id: "ws", name: "WebSocket", workerRuns: 10, gatewayRuns: 5, client: wsClient},
		{id: "openai", name: "OpenAI chat", workerRuns: 10, gatewayRuns: 5, client: openAIClient},
		{id: "aisdk", name: "AI SDK", workerRuns: 10, gatewayRuns: 5, client: aiSDKClient, node: true},
		{id: "agui", name: "AG-UI", workerRuns: 10, gatewayRuns: 5, client: aguiClient, node: true},
		{id: "a2a", name: "A2A", workerRuns: 10, gatewayRuns: 5, client: a2aClient},
		{id: "mcp", name: "MCP", workerRuns: 10, client: mcpClient},
	}
}

// doorTrials are two trials a door, one a fault (none where the door's
// count is 0). In the short suite each runs once. Without Node.js the
// doors whose clients need it are left out, as the e2e tests that run
// those clients skip, except under CI=true, where their runs fail and
// say why.
func doorTrials() []trial {
	var out []trial
	for _, d := range doors() {
		if d.node && !nodeclient.Installed() && os.Getenv("CI") != "true" {
			continue
		}
		if d.workerRuns > 0 {
			out = append(out, trial{id: d.id + "-worker-kill", name: d.name + ": SIGKILL the worker streaming the answer",
				runs: d.workerRuns, short: 1, custom: doorRun(d, killStreamingWorker)})
		}
		if d.gatewayRuns > 0 {
			out = append(out, trial{id: d.id + "-gateway-kill", name: d.name + ": SIGKILL the gateway a client streams from",
				runs: d.gatewayRuns, short: 1, custom: doorRun(d, nil)})
		}
	}
	return out
}

// doorRun runs one turn through the door and strikes as its answer
// streams: with strike, or, when it is nil, by killing the gateway the
// client streams from and moving the balancer to the other one.
func doorRun(d door, strike func(context.Context, *env, strikePoint) error) func(context.Context, *env, string) error {
	return func(ctx context.Context, e *env, job string) error {
		spec := computeTurn("", "calc")(e, job)
		lb, err := gatewayBalancer(e)
		if err != nil {
			return err
		}
		defer lb.close()
		// hit is this run's strike: a gateway kill moves this run's
		// balancer.
		hit, gatewayKill := strike, strike == nil
		if gatewayKill {
			hit = func(ctx context.Context, e *env, _ strikePoint) error {
				if err := lb.killFirst(e); err != nil {
					return err
				}
				time.Sleep(500 * time.Millisecond)
				return e.top.Gateways[0].Start(ctx)
			}
		}

		// The observer reads the turn from the second gateway, which no
		// strike kills, and strikes at the answer's first token.
		octx, stopObserving := context.WithCancel(ctx)
		defer stopObserving()
		struck := make(chan error, 1)
		observed := make(chan observation, 1)
		go func() { observed <- e.observe(octx, time.Now(), hit, struck) }()

		read, err := d.client(ctx, e, doorCall{base: "http://" + lb.addr(), job: job, prompt: spec.prompt})
		if err != nil {
			return fmt.Errorf("%s client: %w", d.name, err)
		}
		var o observation
		select {
		case o = <-observed:
		case <-time.After(time.Minute):
			return errors.New("the client read the turn's end, and the observer did not within a minute")
		}
		if o.err != nil {
			return fmt.Errorf("observer: %w", o.err)
		}
		// The strike may still be bringing its process back.
		select {
		case err := <-struck:
			if err != nil {
				return fmt.Errorf("strike: %w", err)
			}
		case <-time.After(time.Minute):
			return errors.New("no strike within a minute of the turn's end: the observer saw no answer token")
		}
		if read.resumed > 0 {
			e.note(fmt.Sprintf("the client resumed %d time(s)", read.resumed))
		}
		e.paused(o.run)
		if gatewayKill && read.resumed == 0 {
			return errors.New("the client's stream never broke: the gateway was killed after the client had read the turn's end")
		}
		return e.checkDoor(ctx, read, o, spec)
	}
}

// observation is the turn as the observer read it.
type observation struct {
	workflowID string
	run        *turnRun
	err        error
}

// observe finds the turn that started at or after since, follows it over
// gRPC on the second gateway, and at the answer's first token strikes
// (once, in the background; struck gets the outcome).
func (e *env) observe(ctx context.Context, since time.Time, strike func(context.Context, *env, strikePoint) error, struck chan<- error) observation {
	wf, err := e.newTurn(ctx, since)
	if err != nil {
		return observation{err: err}
	}
	run := &turnRun{job: wf[strings.LastIndexByte(wf, '/')+1:], workflowID: wf, gateway: 1, tokens: map[int64]string{}}
	fired := false
	err = e.stream(ctx, run, nil, func(m moment, _ *pb.ToolEvent) {
		if fired || m != onAnswer {
			return
		}
		fired = true
		at := strikePoint{workflowID: wf, gateway: 0, run: run}
		go func() { struck <- strike(ctx, e, at) }()
	})
	return observation{workflowID: wf, run: run, err: err}
}

// newTurn is the workflow id of the chaos tenant's turn that started at
// or after since, as Temporal's visibility lists it: the runs of a trial
// are one at a time, and a door need not tell its client the turn's id
// before it ends (nor start it directly: a session's turn is its
// Conversation's child).
func (e *env) newTurn(ctx context.Context, since time.Time) (string, error) {
	c, err := client.DialContext(ctx, client.Options{HostPort: e.top.Stack.TemporalAddress, Namespace: e.top.Stack.Namespace, Logger: quiet{}})
	if err != nil {
		return "", err
	}
	defer c.Close()
	query := fmt.Sprintf("WorkflowType = '%s' AND %s = '%s' AND StartTime >= '%s'",
		contract.AgentTurn, contract.SearchTenant.GetName(), tenant, since.UTC().Format(time.RFC3339Nano))
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: e.top.Stack.Namespace, Query: query})
		if err == nil && len(resp.GetExecutions()) > 0 {
			return resp.GetExecutions()[0].GetExecution().GetWorkflowId(), nil
		}
		if err := pause(ctx, 50*time.Millisecond); err != nil {
			return "", fmt.Errorf("no turn of the run started: %w", err)
		}
	}
}

// checkDoor checks what the client read against what the turn stored.
func (e *env) checkDoor(ctx context.Context, read doorRead, o observation, spec turnSpec) error {
	job := o.run.job
	if read.job != "" && read.job != job {
		return fmt.Errorf("the client read turn %q, the observer %q", read.job, job)
	}
	if len(read.flaws) > 0 {
		return fmt.Errorf("the client read duplicates or gaps: %s", strings.Join(read.flaws, "; "))
	}
	if o.run.status != pb.Status_STATUS_COMPLETED {
		return fmt.Errorf("turn ended %s (%s), want COMPLETED", o.run.status, o.run.errType)
	}
	var results int
	var stored string
	if err := e.db.QueryRow(ctx, `SELECT count(*), coalesce(min(result_data->>'output'), '') FROM agent_results WHERE tenant_id = $1 AND job_id = $2`,
		tenant, job).Scan(&results, &stored); err != nil {
		return fmt.Errorf("read the result: %w", err)
	}
	if results != 1 {
		return fmt.Errorf("%d agent_results rows for the job, want 1", results)
	}
	if stored != spec.want {
		return fmt.Errorf("stored result %q, want the model's answer %q", stored, spec.want)
	}
	if got := strings.TrimSpace(read.text); got != stored {
		return fmt.Errorf("the client read %q, the stored result is %q", got, stored)
	}
	if read.session != "" {
		got, err := e.transcript(ctx, read.session)
		if err != nil {
			return err
		}
		if len(got) != 2 || got[0] != "user: "+spec.prompt || got[1] != "assistant: "+spec.want {
			return fmt.Errorf("transcript %q, want the prompt and the answer once each", got)
		}
	}
	return nil
}

// logReader reads a turn's events as SSE and WebSocket carry them (the
// log's own, each with its index) and checks them as the gRPC stream's
// reader does: each index the one after the last, the answer's tokens
// less those a retried call voided.
type logReader struct {
	last    int64
	tokens  map[int64]string
	content string
	status  string
	flaws   []string
}

func newLogReader() *logReader { return &logReader{tokens: map[int64]string{}} }

// add takes the next event; false when it is not the one after the last
// (a flaw, noted).
func (r *logReader) add(ev agent.Event) bool {
	if ev.Index != r.last+1 {
		r.flaws = append(r.flaws, fmt.Sprintf("event %d after event %d", ev.Index, r.last))
		return false
	}
	r.last = ev.Index
	if ev.Child != nil {
		return true
	}
	switch ev.Kind {
	case agent.EventToken:
		r.tokens[ev.Index] = ev.Text
	case agent.EventStatus:
		if ev.Status == agent.StreamRetrying && ev.VoidFrom > 0 {
			for i := range r.tokens {
				if i >= ev.VoidFrom {
					delete(r.tokens, i)
				}
			}
		}
		r.status = ev.Status
	case agent.EventContent:
		var b agent.Block
		if err := json.Unmarshal(ev.Content, &b); err == nil {
			r.content = b.Text
		}
	}
	return true
}

// ended: the turn's terminal status is read.
func (r *logReader) ended() bool {
	return r.status == agent.StreamCompleted || r.status == agent.StreamFailed || r.status == agent.StreamCanceled
}

// text is the answer streamed (its tokens, less the voided ones), which
// must also be the content block's text.
func (r *logReader) text() string {
	var b strings.Builder
	for i := int64(1); i <= r.last; i++ {
		b.WriteString(r.tokens[i])
	}
	streamed := strings.TrimSpace(b.String())
	if streamed != strings.TrimSpace(r.content) {
		r.flaws = append(r.flaws, fmt.Sprintf("tokens %q but content block %q", streamed, r.content))
	}
	return streamed
}
