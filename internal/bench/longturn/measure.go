package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/contract"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// report is the program's last line. Times are in milliseconds, memory
// in MiB; worker figures are summed over the worker processes (with
// -topology dev, the one process of the worker and the gateway); CPU is
// per model step the turn finished (a tool call's and the answer's).
type report struct {
	Topology  string  `json:"topology"`
	Calls     int     `json:"calls"`
	Completed bool    `json:"completed"`
	Failure   string  `json:"failure,omitempty"`
	Seconds   float64 `json:"seconds"`
	ToolCalls int     `json:"tool_calls"` // tool calls that ended ok, as the stream showed them

	Runs               int     `json:"runs"`
	RunEvents          []int64 `json:"run_events"`
	RunHistoryBytes    []int64 `json:"run_history_bytes"`
	MaxRunEvents       int64   `json:"max_run_events"`
	MaxRunHistoryBytes int64   `json:"max_run_history_bytes"`
	LastRunStatus      string  `json:"last_run_status"`

	Events     int64 `json:"events"` // the stream's last index
	Duplicates int   `json:"duplicates"`
	Missing    int   `json:"missing"`
	Resumes    int   `json:"resumes"`

	// Step times as the model saw them (model.stepTimes): the median of
	// the first and last hundred (the keys the follower's times had), the
	// median and 99th percentile of the first and last thousand, and
	// last/first of the thousands' medians.
	StepP50First100  float64 `json:"step_ms_p50_first100"`
	StepP50Last100   float64 `json:"step_ms_p50_last100"`
	StepP50First1000 float64 `json:"step_ms_p50_first1000"`
	StepP99First1000 float64 `json:"step_ms_p99_first1000"`
	StepP50Last1000  float64 `json:"step_ms_p50_last1000"`
	StepP99Last1000  float64 `json:"step_ms_p99_last1000"`
	StepLastFirst    float64 `json:"step_p50_last_over_first"`
	CPUPerStep       float64 `json:"cpu_ms_per_step"`
	TemporalCPU      float64 `json:"temporal_cpu_ms_per_step"`

	ModelRequests     int     `json:"model_requests"`
	MaxModelRequest   int     `json:"max_model_request_bytes"`
	FirstModelRequest int     `json:"first_model_request_bytes"`
	LastModelRequest  int     `json:"last_model_request_bytes"`
	WorkerRSSStart    float64 `json:"worker_rss_mib_start"`
	WorkerRSSEnd      float64 `json:"worker_rss_mib_end"`
	WorkerRSSPeak     float64 `json:"worker_rss_mib_peak"`
	InputTokens       int64   `json:"input_tokens"`
	CachedInputTokens int64   `json:"cached_input_tokens"`
	CachedInputShare  float64 `json:"cached_input_share"`

	// The turn's timeline (the turn page's JSON) once it has ended: its
	// first page of 200 steps, its last, and every page of 1000 read in
	// turn, in ms; and how many steps they held.
	TimelineFirstPage float64 `json:"timeline_first_page_ms"`
	TimelineLastPage  float64 `json:"timeline_last_page_ms"`
	TimelineAllPages  float64 `json:"timeline_all_pages_ms"`
	TimelineSteps     int     `json:"timeline_steps"`
}

// measure defines the agent, runs the turn with a follower on its stream
// and gathers the report. Its error is what kept it from measuring; a
// turn that failed is a report that says so.
func measure(ctx context.Context, o options, st *stack, m *model) (report, error) {
	r := report{Topology: o.topology, Calls: o.calls}
	conn, err := grpc.NewClient(st.gateway, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return r, err
	}
	defer conn.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+o.token)
	if _, err := pb.NewCatalogServiceClient(conn).UpsertCatalog(ctx, &pb.UpsertCatalogRequest{
		Files: map[string]string{"longturn.yaml": agentYAML(o.calls)}}); err != nil {
		return r, fmt.Errorf("define the agent: %w", err)
	}
	job := fmt.Sprintf("longturn-%d", time.Now().UnixNano())
	api := pb.NewAgentServiceClient(conn)
	f := newFollower(api, contract.TurnWorkflowID("demo", job))
	before := sample(st)
	peak := watchRSS(st)
	progress("turn %s: %d calls", f.streamID, o.calls)
	begin := time.Now()
	turnErr := f.run(ctx, o, &pb.TurnRequest{JobId: job, AgentId: "longturn",
		Prompt: fmt.Sprintf("Count to %d with the calculator, one step at a time.", o.calls)})
	r.Seconds = round(time.Since(begin).Seconds())
	after := sample(st)
	r.WorkerRSSPeak = round(max(peak(), after.rss))
	r.WorkerRSSStart, r.WorkerRSSEnd = round(before.rss), round(after.rss)
	steps := float64(max(1, f.stepsDone()))
	r.CPUPerStep = round((after.cpu - before.cpu) / steps)
	r.TemporalCPU = round((after.server - before.server) / steps)
	r.fromFollower(f)
	r.fromModel(m)
	r.fromSteps(m.stepTimes())
	if last, missing, err := f.missing(ctx); err != nil {
		progress("%v", err)
	} else {
		r.Events, r.Missing = last, missing
	}
	if rs, err := runs(ctx, st.temporal, st.namespace, f.streamID); err != nil {
		progress("%v", err)
	} else {
		r.fromRuns(rs)
	}
	if st.httpAPI != "" {
		if err := r.readTimeline(ctx, st.httpAPI, o.token, f.streamID); err != nil {
			progress("read the turn's timeline: %v", err)
		}
	}
	if turnErr != nil {
		r.Failure = strings.TrimSuffix(turnErr.Error()+"; "+r.Failure, "; ")
	}
	r.Completed = f.status == pb.Status_STATUS_COMPLETED && r.ToolCalls == o.calls &&
		strings.Contains(f.text.String(), fmt.Sprintf("Counted to %d.", o.calls))
	if f.status == pb.Status_STATUS_COMPLETED && !r.Completed {
		r.Failure = fmt.Sprintf("completed with %d tool calls and the answer %q", r.ToolCalls, clip(f.text.String()))
	}
	return r, nil
}

// run follows the turn until it ends or -timeout passes, when it cancels
// the turn, so that it does not run on in the stack.
func (f *follower) run(ctx context.Context, o options, req *pb.TurnRequest) error {
	turnCtx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Second):
				progress("%s", f.progressLine())
			}
		}
	}()
	err := f.follow(turnCtx, req)
	if err == nil || f.ended() {
		return err
	}
	if turnCtx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("gave up after %s (-timeout)", o.timeout)
	}
	// The turn must not run on in the stack: cancel it, and read what
	// the cancel adds to its stream.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer ccancel()
	if _, cerr := f.api.Cancel(cctx, &pb.CancelRequest{StreamId: f.streamID, Reason: "the long-turn benchmark gave up"}); cerr != nil {
		progress("cancel the turn: %v", cerr)
	} else if derr := f.drain(cctx); derr != nil {
		progress("read the canceled turn's stream: %v", derr)
	}
	return err
}
