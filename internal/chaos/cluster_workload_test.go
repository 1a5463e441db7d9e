package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/checker"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/tools/kind"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// workload is a trial's clients: each starts turn after turn — writes
// that deduplicate nothing, writes the far side deduplicates, a write a
// person approves or denies, a message to the client's conversation —
// and follows it to its end, resuming where a broken stream left off.
// Beside them a probe turn runs every probeEvery. What they saw is
// recorded for the checker.
type workload struct {
	e   *clusterEnv
	run string // the trial's prefix of job ids
	rec checker.Recorder
	// careless has every turn write with the tool that switches the
	// at-most-once protection off; drop has one client lose an event.
	careless, drop bool
	// big has the writes' turns fetch the large report instead.
	big     bool
	dropped atomic.Bool

	mu        sync.Mutex
	turns     map[string]*checker.Turn
	approvals []checker.Approval
	sessions  map[string]*checker.Session
	probes    []checker.Probe
	// asked are the calls (by key) a person was asked to approve.
	asked map[string]bool
}

const (
	probeEvery = 250 * time.Millisecond
	// followFor bounds how long a client follows one turn, resuming.
	followFor = 4 * time.Minute
)

func newWorkload(e *clusterEnv, run string) *workload {
	return &workload{e: e, run: run, turns: map[string]*checker.Turn{}, sessions: map[string]*checker.Session{}, asked: map[string]bool{}}
}

// drive runs clients until ctx ends (they finish the turn they follow,
// within followFor) and the probe until stop ends.
func (w *workload) drive(ctx context.Context, clients int) {
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.client(ctx, fmt.Sprintf("c%d", i))
		}()
	}
	wg.Wait()
}

// client starts turns, one after another, of each kind in turn.
func (w *workload) client(ctx context.Context, name string) {
	session := w.run + "-" + name
	for k := 0; ctx.Err() == nil; k++ {
		job := fmt.Sprintf("%s-%s-%d", w.run, name, k)
		// The turn is followed to its end even once ctx ends.
		follow, cancel := context.WithTimeout(context.WithoutCancel(ctx), followFor)
		switch k % 4 {
		case 0, 1, 2:
			switch {
			case w.careless:
				w.turn(follow, name, job, "careless for "+job)
			case w.big:
				w.turn(follow, name, job, "big for "+job)
			default:
				w.kind(follow, name, job, k)
			}
		default:
			w.message(follow, name, session, job, fmt.Sprintf("say w%d", k))
		}
		cancel()
	}
}

// kind starts the client's k-th turn: writes, idempotent writes, or a
// guarded write.
func (w *workload) kind(ctx context.Context, name, job string, k int) {
	switch k % 4 {
	case 0:
		w.turn(ctx, name, job, "write for "+job)
	case 1:
		w.turn(ctx, name, job, "record for "+job)
	default:
		w.turn(ctx, name, job, "guard for "+job)
	}
}

// turn starts a streamed turn and follows it.
func (w *workload) turn(ctx context.Context, client, job, prompt string) {
	t := &checker.Turn{Job: job}
	w.mu.Lock()
	w.turns[job] = t
	w.mu.Unlock()
	sr := w.rec.Follow(client+"/"+job, job, 0)
	agent := "writer"
	if strings.HasPrefix(prompt, "careless") {
		agent = "careless"
	}
	req := &pb.TurnRequest{JobId: job, Prompt: prompt, AgentId: agent}
	open := func(ctx context.Context) (pb.AgentService_StreamClient, error) {
		if sr.Last() > 0 {
			return pb.NewAgentServiceClient(w.e.conn).Resume(ctx, &pb.ResumeRequest{StreamId: contract.TurnWorkflowID(clTenant, job), AfterIndex: sr.Resume()})
		}
		// Before its first event a start is repeated as it was: the
		// gateway answers a job id it knows with its turn.
		return pb.NewAgentServiceClient(w.e.conn).Stream(ctx, &pb.StreamRequest{Turn: req})
	}
	w.follow(ctx, job, sr, open, func() { w.mu.Lock(); t.Accepted = true; w.mu.Unlock() })
}

// message sends a message to the client's conversation and follows the
// turn that answers it.
func (w *workload) message(ctx context.Context, client, session, job, prompt string) {
	w.mu.Lock()
	s := w.sessions[session]
	if s == nil {
		s = &checker.Session{ID: session}
		w.sessions[session] = s
	}
	s.Sent = append(s.Sent, checker.Message{Job: job, Prompt: prompt})
	msg := &s.Sent[len(s.Sent)-1]
	t := &checker.Turn{Job: job}
	w.turns[job] = t
	w.mu.Unlock()
	var res *pb.SendMessageResponse
	err := retry(ctx, func(ctx context.Context) (err error) {
		res, err = pb.NewAgentServiceClient(w.e.conn).SendMessage(w.e.auth(ctx), &pb.SendMessageRequest{SessionId: session, Prompt: prompt, JobId: job, AgentId: "writer"})
		return err
	})
	if err != nil {
		return
	}
	w.mu.Lock()
	msg.Accepted, t.Accepted = true, true
	w.mu.Unlock()
	sr := w.rec.Follow(client+"/"+job, job, 0)
	w.follow(ctx, job, sr, func(ctx context.Context) (pb.AgentService_StreamClient, error) {
		return pb.NewAgentServiceClient(w.e.conn).Resume(ctx, &pb.ResumeRequest{StreamId: res.GetStreamId(), AfterIndex: sr.Resume()})
	}, func() {})
}

// follow reads the turn's stream until its terminal event, opening it
// again (open resumes after the last index) whenever it breaks.
func (w *workload) follow(ctx context.Context, job string, sr *checker.StreamRecorder, open func(context.Context) (pb.AgentService_StreamClient, error), accepted func()) {
	answer := ""
	for ctx.Err() == nil {
		st, err := open(w.e.auth(ctx))
		for err == nil {
			var ev *pb.StreamEvent
			if ev, err = st.Recv(); err != nil {
				break
			}
			if sr.Last() == 0 {
				accepted()
			}
			if idx := ev.GetMeta().GetEventIndex(); idx != 3 || !w.drop || !w.dropped.CompareAndSwap(false, true) {
				sr.Event(idx)
			}
			if ev.GetMeta().GetChild() != nil {
				continue
			}
			if text := contentText(ev.GetContent()); text != "" {
				answer = text
			}
			w.take(ctx, job, ev)
			if s := ev.GetStatus().GetStatus(); terminal(s) {
				sr.Ended(checker.ParseEnd(s.String()), answer)
				return
			}
		}
		if errors.Is(err, io.EOF) {
			err = errors.New("stream ended without its terminal event")
		}
		w.e.log.Info("stream broke; resuming", zap.String("job", job), zap.Int64("after", sr.Last()), zap.Error(err))
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// writes are the tools that write to a counting API.
var writes = map[string]bool{"append": true, "record": true, "guarded_append": true, "careless_append": true}

// take records what an event says of a call: its end, and a decision
// it waits for, which the client makes once.
func (w *workload) take(ctx context.Context, job string, ev *pb.StreamEvent) {
	if te := ev.GetToolEnd(); te != nil {
		key := kind.CallKey(clTenant, job, te.GetCallId())
		if te.GetStatus() != "ok" {
			// The trial's log says what a call that did not end ok said.
			w.e.log.Info("call did not end ok", zap.String("job", job), zap.String("tool", te.GetName()), zap.String("call", te.GetCallId()),
				zap.String("key", key), zap.String("status", te.GetStatus()), zap.String("output", te.GetOutput()))
		}
		if writes[te.GetName()] {
			w.rec.CallEnded(key, job, checker.ParseOutcome(te.GetStatus()))
		}
	}
	ar := ev.GetApprovalRequired()
	if ar == nil {
		return
	}
	key := kind.CallKey(clTenant, job, ar.GetCallId())
	w.mu.Lock()
	resend := w.asked[key]
	w.asked[key] = true
	w.mu.Unlock()
	if resend {
		// Asked again for a call already decided: its outcome is unknown,
		// and the product asks whether to send it a second time. The
		// person does not, not having checked whether it went through:
		// a second delivery would be theirs, not the product's.
		no := false
		_ = retry(ctx, func(ctx context.Context) error {
			_, err := pb.NewAgentServiceClient(w.e.conn).Approve(w.e.auth(ctx), &pb.ApproveRequest{
				StreamId: contract.TurnWorkflowID(clTenant, job), CallId: ar.GetCallId(), ApprovalId: ar.GetApprovalId(), Approved: &no,
				Reason: "not sent again: whether it went through was not checked"})
			return err
		})
		w.e.log.Info("declined to send a call again", zap.String("job", job), zap.String("call", ar.GetCallId()))
		return
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(job))
	approve := h.Sum32()%3 != 0
	a := checker.Approval{ID: ar.GetApprovalId(), Job: job, Approve: approve, Key: key}
	_ = retry(ctx, func(ctx context.Context) error {
		a.Sent++
		res, err := pb.NewAgentServiceClient(w.e.conn).Approve(w.e.auth(ctx), &pb.ApproveRequest{
			StreamId: contract.TurnWorkflowID(clTenant, job), CallId: ar.GetCallId(), ApprovalId: ar.GetApprovalId(), Approved: &approve})
		if err == nil && res.GetOutcome() != "" {
			a.Accepted++
		}
		return err
	})
	w.mu.Lock()
	w.approvals = append(w.approvals, a)
	w.mu.Unlock()
}

// probe runs a small turn every probeEvery until ctx ends, recording
// when each ended and whether it answered.
func (w *workload) probe(ctx context.Context) {
	for n := 0; ctx.Err() == nil; n++ {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := pb.NewAgentServiceClient(w.e.conn).Invoke(w.e.auth(pctx), &pb.InvokeRequest{Turn: &pb.TurnRequest{
			JobId: fmt.Sprintf("%s-probe-%d", w.run, n), Prompt: "ping", AgentId: "writer"}})
		cancel()
		ok := err == nil && res.GetStatus() == "completed"
		w.mu.Lock()
		w.probes = append(w.probes, checker.Probe{At: time.Now(), OK: ok})
		w.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(probeEvery):
		}
	}
}

// retry calls f until it succeeds, fails for a reason a retry cannot
// mend, or ctx ends.
func retry(ctx context.Context, f func(context.Context) error) error {
	for {
		actx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := f(actx)
		cancel()
		switch status.Code(err) {
		case codes.OK:
			return nil
		case codes.Unavailable, codes.DeadlineExceeded, codes.Internal, codes.Unknown, codes.Aborted:
		default:
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// contentText is the text of a content block, "" for another block.
func contentText(c *pb.ContentEvent) string {
	if c == nil {
		return ""
	}
	var b struct{ Type, Text string }
	if json.Unmarshal([]byte(c.GetBlockJson()), &b) != nil || b.Type != "text" {
		return ""
	}
	return b.Text
}
