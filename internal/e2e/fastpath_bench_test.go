package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// BenchmarkCancelLocalCall measures how long a cancellation through the
// gateway takes to reach a model call in flight of an agent whose calls
// are local (at the default task timeout, whose heartbeat would come
// after the call's end): 100 turns, four at a time, each cancelled
// over gRPC after its second token; the time from the Cancel call to the
// follower's STATUS_CANCELED, which the turn logs once the stopped call
// has returned and the signal has been read. It reports the p50 and p99.
//
//	.bin/starter stack -- go test -count=1 -run '^$' -bench BenchmarkCancelLocalCall -benchtime 1x ./internal/e2e/
func BenchmarkCancelLocalCall(b *testing.B) {
	s := testserver.Start(b, testserver.Options{
		Script: strings.Replace(testScript, "delay_ms: 15", "delay_ms: 60", 1), Catalogs: []string{localCatalog},
		Tokens: map[string]string{"tok-demo": "demo:user:ana"}})
	require.Eventually(b, s.Hub().Connected, time.Minute, 10*time.Millisecond)
	for b.Loop() {
		reportLatencies(b, 100, 4, func() (time.Duration, bool) { return cancelMidAnswer(b, s), true })
	}
}

// cancelMidAnswer starts a turn, cancels it through the gateway after its
// second token, and returns how long the cancellation took to end its
// stream.
func cancelMidAnswer(b *testing.B, s *testserver.Server) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := agent.TurnRequest{TenantID: "demo", JobID: "job-" + testserver.RandomID(), Prompt: "tell a story"}
	req.Normalize()
	id := contract.TurnWorkflowID(req.TenantID, req.JobID)
	var events []agent.Event
	var sent, ended time.Time
	err := followNew(ctx, s.Follower(), s.Client(), turnclient.StartOptions(s.TaskQueue, req), req, func(ev agent.Event) error {
		events = append(events, ev)
		if sent.IsZero() && countTokens(events) == 2 {
			sent = time.Now()
			_, err := pb.NewAgentServiceClient(s.Conn).Cancel(grpcAs(ctx, "tok-demo"), &pb.CancelRequest{StreamId: id, Reason: "enough"})
			return err
		}
		if ev.Status == agent.StreamCanceled {
			ended = time.Now()
		}
		return nil
	})
	// (Not Fatal: it runs on a goroutine of the benchmark's.)
	if err != nil {
		b.Error(err)
		return 0
	}
	if sent.IsZero() || ended.IsZero() {
		b.Errorf("turn %s was not cancelled mid-answer", id)
		return 0
	}
	return ended.Sub(sent)
}

// BenchmarkSteerCall measures how long a message steered into a
// conversation's turn takes to reach the model call streaming its answer:
// 100 conversations, four at a time, each sent a second message with
// on_busy steer after its story's third token; the time from the
// SendMessage call to the steered event on the conversation's stream
// (Workflow Streams), which the turn logs once the interrupted call has
// returned. A steer that waited for the story's end would take seconds
// (about 100 words at 60 ms). It reports the p50, the p99 and the
// slowest.
//
//	.bin/starter stack -- go test -count=1 -run '^$' -bench BenchmarkSteerCall -benchtime 1x ./internal/e2e/
func BenchmarkSteerCall(b *testing.B) {
	s := testserver.Start(b, testserver.Options{
		Script: strings.Replace(testScript, "delay_ms: 15", "delay_ms: 60", 1), Catalogs: []string{testCatalog}})
	require.Eventually(b, s.Hub().Connected, time.Minute, 10*time.Millisecond)
	for b.Loop() {
		reportLatencies(b, 100, 4, func() (time.Duration, bool) { return steerMidAnswer(b, s) })
	}
}

// reportLatencies runs measure calls times, conc at a time, and reports
// the p50, p99 and slowest of what it measured; each must measure (a
// false is a failure it reported).
func reportLatencies(b *testing.B, calls, conc int, measure func() (time.Duration, bool)) {
	var mu sync.Mutex
	var took []time.Duration
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for range jobs {
				if d, ok := measure(); ok {
					mu.Lock()
					took = append(took, d)
					mu.Unlock()
				}
			}
		})
	}
	for i := range calls {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	require.Len(b, took, calls)
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
}

// steerMidAnswer starts a conversation whose turn tells a story, steers a
// message into it after the story's third token, and returns how long the
// message took to show as steered on the conversation's stream.
func steerMidAnswer(b *testing.B, s *testserver.Server) (time.Duration, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := agent.ConversationInput{TenantID: "demo", SessionID: "steer-" + testserver.RandomID()}
	story, err := turnclient.SendMessage(ctx, s.Client(), s.TaskQueue, in, agent.SendMessage{Prompt: "tell a story"})
	// (Not Fatal: it runs on a goroutine of the benchmark's.)
	if err != nil {
		b.Error(err)
		return 0, false
	}
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	tokens := 0
	errEnough := errors.New("enough")
	err = s.Follower().Follow(fctx, story.TurnWorkflowID, 0, func(ev agent.Event) error {
		if ev.Kind == agent.EventToken {
			tokens++
		}
		if tokens == 3 {
			return errEnough
		}
		return nil
	})
	if !errors.Is(err, errEnough) {
		b.Errorf("the story of %s did not stream: %v", story.TurnWorkflowID, err)
		return 0, false
	}
	sent := time.Now()
	steer, err := turnclient.SendMessage(ctx, s.Client(), s.TaskQueue, in, agent.SendMessage{Prompt: "now make it about a cat", OnBusy: agent.OnBusySteer})
	if err != nil || !steer.Steered {
		b.Errorf("the message was not steered into %s: %v", story.TurnWorkflowID, err)
		return 0, false
	}
	var seen time.Time
	checked := 0
	_, err = wsFollow(ctx, s.Client(), contract.ConversationWorkflowID(in.TenantID, in.SessionID), nil, 0, func(items []wsItem) bool {
		for ; checked < len(items); checked++ {
			var ev agent.Event
			if it := items[checked]; it.Topic == "events" && json.Unmarshal(it.Payload.GetData(), &ev) == nil &&
				ev.Kind == agent.EventSteered && ev.Message != nil && ev.Message.ID == steer.JobID {
				seen = time.Now()
			}
		}
		return !seen.IsZero()
	})
	if err != nil {
		b.Error(err)
		return 0, false
	}
	// The turn ends before the next conversation starts.
	if _, err := turnclient.Result(ctx, s.Client().GetWorkflow(ctx, story.TurnWorkflowID, "")); err != nil {
		b.Error(err)
		return 0, false
	}
	return seen.Sub(sent), true
}

// BenchmarkLocalCallHistory reports the history events of a turn whose
// one local model call streams for about 30 s (the default task timeout:
// a heartbeat every 8 s), and those of the same turn on an activity.
//
//	.bin/starter stack -- go test -count=1 -run '^$' -bench BenchmarkLocalCallHistory -benchtime 1x ./internal/e2e/
func BenchmarkLocalCallHistory(b *testing.B) {
	for _, tt := range []struct{ name, catalog string }{{"local", localCatalog}, {"activity", testCatalog}} {
		b.Run(tt.name, func(b *testing.B) {
			s := testserver.Start(b, testserver.Options{
				Script: strings.Replace(testScript, "delay_ms: 15", "delay_ms: 430", 1), Catalogs: []string{tt.catalog}})
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				req := agent.TurnRequest{TenantID: "demo", JobID: "job-" + testserver.RandomID(), Prompt: "tell a story"}
				req.Normalize()
				id := contract.TurnWorkflowID(req.TenantID, req.JobID)
				start := time.Now()
				run, err := s.Client().ExecuteWorkflow(ctx, turnclient.StartOptions(s.TaskQueue, req), contract.AgentTurn, req)
				require.NoError(b, err)
				require.NoError(b, run.Get(ctx, nil))
				took := time.Since(start)
				events := testserver.History(ctx, b, s.Client(), id, "")
				tasks := 0
				for _, ev := range events {
					if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
						tasks++
					}
				}
				cancel()
				b.ReportMetric(took.Seconds(), "turn-s")
				b.ReportMetric(float64(len(events)), "events")
				b.ReportMetric(float64(tasks), "workflow-tasks")
			}
		})
	}
}
