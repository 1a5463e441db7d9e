package topology

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/sse"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// shutdownStopTimeout is the processes' AGENTFLOW_STOP_TIMEOUT in the
// shutdown tests: longer than the tests hold the model, so that what
// they see is the drain, never the timeout.
const shutdownStopTimeout = 2 * time.Minute

// TestWorkerShutdown sends SIGTERM to the worker process that runs ten
// streamed turns' model calls: it turns unready at once, polls no more (a
// new turn runs on the other worker), lets the ten calls stream to their
// end and exits 0 within the stop timeout; every turn completes, each
// model call made once, on that worker, its stream whole. The calls are
// local activities (the default) that the model holds past the hand-off:
// each runs on in the stopping worker under the AwaitModel activity that
// took it over, which the worker must carry to its end.
func TestWorkerShutdown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	h := startHeldTopology(ctx, t, Options{Workers: 1, Gateways: 1, Env: []string{
		"AGENTFLOW_STOP_TIMEOUT=" + shutdownStopTimeout.String()}})
	w1 := h.Workers[0]

	held := make([]*turn, 10)
	done := make(chan error, len(held))
	for i := range held {
		held[i] = &turn{job: fmt.Sprintf("hold-worker-%d", i)}
		go func(tr *turn) { done <- streamGRPC(ctx, h.Conns, tr, nil, nil) }(held[i])
	}
	require.Eventually(t, func() bool { return h.Model.Waiting() == len(held) }, 2*time.Minute, 50*time.Millisecond,
		"ten model calls in flight on the one worker")
	pid := w1.PID()
	require.Eventually(t, func() bool {
		for _, tr := range held {
			if !h.awaitingOn(ctx, tr.streamID(), pid) {
				return false
			}
		}
		return true
	}, time.Minute, 200*time.Millisecond, "each held call handed off to an AwaitModel activity on the worker")
	w2, err := h.AddWorker(ctx)
	require.NoError(t, err)

	begin := time.Now()
	require.NoError(t, w1.Terminate())
	require.Eventually(t, func() bool {
		code, failing, err := healthz(w1)
		return err == nil && code == http.StatusServiceUnavailable && failing == "shutdown"
	}, time.Minute, 20*time.Millisecond, "unready first")
	require.True(t, w1.Running(), "the worker waits for its model calls")
	h.requireNewTurnsOn(ctx, t, w2)
	require.True(t, w1.Running(), "the worker still waits for its model calls")

	h.Model.Release()
	wctx, wcancel := context.WithTimeout(ctx, shutdownStopTimeout)
	defer wcancel()
	require.NoError(t, w1.Wait(wctx), "the worker exits by itself, with status 0, within its stop timeout")
	t.Logf("the worker exited %s after SIGTERM", time.Since(begin).Round(time.Millisecond))
	for range held {
		require.NoError(t, <-done)
	}
	for _, tr := range held {
		require.Equal(t, pb.Status_STATUS_COMPLETED, tr.status, tr.job)
		require.Equal(t, tr.want(), strings.TrimSpace(tr.text.String()), "%s streamed to its end", tr.job)
		require.Equal(t, 1, h.Model.Calls(tr.job), "model calls of %s", tr.job)
		h.requireModelCallBy(ctx, t, tr.streamID(), pid)
	}
}

// requireNewTurnsOn checks that new turns run on the worker p once a
// stopping worker's stop has reached the server. The SDK lets its polls
// in flight at the stop end by themselves (the server ends them once it
// hears of the stop), and a task one of them brings is run by the
// stopping worker, not lost: so a turn started just after SIGTERM may
// still have its first task there. Of five quick turns one after
// another, each completes, and the last runs wholly on p.
func (h *heldTopology) requireNewTurnsOn(ctx context.Context, t *testing.T, p *Process) {
	t.Helper()
	var last string
	for i := range 5 {
		last = h.runQuick(ctx, t, fmt.Sprintf("quick-after-sigterm-%d", i))
		if h.ranOn(ctx, t, last, p) {
			break
		}
	}
	h.requireRanOn(ctx, t, last, p)
}

// awaitingOn reports whether a turn's model call was handed off to an
// AwaitModel activity that the worker process pid runs (a started
// activity is in the history only once it ends: its workflow's pending
// activities say who runs it). It does not fail the test, so that a
// condition of require.Eventually can call it.
func (h *heldTopology) awaitingOn(ctx context.Context, workflowID string, pid int) bool {
	d, err := h.Client.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return false
	}
	for _, a := range d.GetPendingActivities() {
		if a.GetActivityType().GetName() == contract.AwaitModel && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
			return pidOf(a.GetLastWorkerIdentity()) == pid
		}
	}
	return false
}

// requireModelCallBy checks that a turn made one model call, on one
// attempt, on the worker process pid: a local activity (a model call, by
// default) that answered, or an activity — CallModel, or the AwaitModel
// that took over a local call handed off. A regular activity's worker is
// the identity its start records; a local activity runs inside a
// workflow task, and the worker that ran it is the one that completed the
// task recording its marker: had the stopping worker let go of a call,
// that task would be another worker's.
func (h *heldTopology) requireModelCallBy(ctx context.Context, t *testing.T, workflowID string, pid int) {
	t.Helper()
	types := map[int64]string{}
	calls := 0
	var taskBy string // the identity of the latest completed workflow task
	for _, ev := range h.history(ctx, t, workflowID) {
		if a := ev.GetWorkflowTaskCompletedEventAttributes(); a != nil {
			taskBy = a.GetIdentity()
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			types[ev.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			if kind := types[a.GetScheduledEventId()]; kind == contract.CallModel || kind == contract.AwaitModel {
				calls++
				require.Equal(t, pid, pidOf(a.GetIdentity()), "the model call (%s) of %s ran on process %d", kind, workflowID, pid)
				require.EqualValues(t, 1, a.GetAttempt(), "the model call of %s", workflowID)
			}
		}
		if la, ok := localActivityOf(t, ev); ok && la.ActivityType == contract.CallModel {
			require.Equal(t, pid, pidOf(taskBy), "the model call of %s ran on process %d", workflowID, pid)
			require.EqualValues(t, 1, la.Attempt, "the model call of %s", workflowID)
			require.Nil(t, ev.GetMarkerRecordedEventAttributes().GetFailure(), "the model call of %s", workflowID)
			if !handedOff(t, ev) {
				calls++
			}
		}
	}
	require.Equal(t, 1, calls, "model calls of %s", workflowID)
}

// TestGatewayShutdown sends SIGTERM to the gateway that five gRPC and
// five SSE clients stream turns from, and one client Invokes a turn
// through: the gateway turns unready, ends the streams with their resume
// hints (gRPC Unavailable naming the last event, an SSE retry) and waits
// for the Invoke; the clients resume on the other gateway; the turns
// complete; the gateway exits 0 once the Invoke has its answer, and the
// restarted one serves the same events. No stream has a gap, and every
// model call was made once.
func TestGatewayShutdown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	h := startHeldTopology(ctx, t, Options{Workers: 1, Gateways: 2, Env: []string{
		"AGENTFLOW_STOP_TIMEOUT=" + shutdownStopTimeout.String()}})
	g1, g2 := h.Gateways[0], h.Gateways[1]

	var mu sync.Mutex
	started, broken := map[string]bool{}, map[string]bool{}
	var breaks []error
	onEvent := func(job string) func(*pb.StreamEvent) {
		return func(*pb.StreamEvent) { mu.Lock(); started[job] = true; mu.Unlock() }
	}
	var turns []*turn
	done := make(chan error, 11)
	for i := range 5 {
		tr := &turn{job: fmt.Sprintf("hold-grpc-%d", i)}
		turns = append(turns, tr)
		go func() {
			done <- streamGRPC(ctx, h.Conns, tr, onEvent(tr.job), func(err error) {
				mu.Lock()
				defer mu.Unlock()
				if !broken[tr.job] {
					broken[tr.job] = true
					breaks = append(breaks, goingAwayOK(err, tr))
				}
			})
		}()
	}
	for i := range 5 {
		tr := &turn{job: fmt.Sprintf("hold-sse-%d", i)}
		turns = append(turns, tr)
		go func() {
			done <- streamSSE(ctx, []*Process{g1, g2}, tr, func() { mu.Lock(); started[tr.job] = true; mu.Unlock() },
				func() { mu.Lock(); broken[tr.job] = true; mu.Unlock() })
		}()
	}
	invoked := make(chan *pb.TurnResult, 1)
	go func() {
		res, err := pb.NewAgentServiceClient(h.Conns[0]).Invoke(auth(ctx), &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: "hold-invoke", Prompt: "hold hold-invoke"}})
		if err != nil {
			done <- fmt.Errorf("invoke: %w", err)
		} else {
			done <- nil
		}
		invoked <- res
	}()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return h.Model.Waiting() == 11 && len(started) == 10
	}, 2*time.Minute, 50*time.Millisecond, "ten streams open and eleven model calls in flight")

	require.NoError(t, g1.Terminate())
	require.Eventually(t, func() bool {
		code, failing, err := healthz(g1)
		return err == nil && code == http.StatusServiceUnavailable && failing == "shutdown"
	}, time.Minute, 20*time.Millisecond, "unready first")
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(broken) == len(turns)
	}, time.Minute, 20*time.Millisecond, "every stream ended, to go on elsewhere")
	require.True(t, g1.Running(), "the gateway waits for the Invoke")
	mu.Lock()
	require.Len(t, breaks, 5)
	for _, err := range breaks {
		require.NoError(t, err)
	}
	mu.Unlock()

	h.Model.Release()
	for range 11 {
		require.NoError(t, <-done)
	}
	res := <-invoked
	require.Equal(t, "completed", res.GetStatus())
	require.Equal(t, "answer to hold-invoke"+heldTail, res.GetOutput())
	wctx, wcancel := context.WithTimeout(ctx, shutdownStopTimeout)
	defer wcancel()
	require.NoError(t, g1.Wait(wctx), "the gateway exits by itself, with status 0")

	require.NoError(t, g1.Start(ctx), "the gateway starts again")
	for _, tr := range turns {
		require.Equal(t, pb.Status_STATUS_COMPLETED, tr.status, tr.job)
		require.Equal(t, tr.want(), strings.TrimSpace(tr.text.String()), tr.job)
		require.Equal(t, 1, h.Model.Calls(tr.job), "model calls of %s", tr.job)
		// The restarted gateway serves the same log.
		again := &turn{job: tr.job, follow: true}
		require.NoError(t, streamGRPC(ctx, h.Conns[:1], again, nil, nil))
		require.Equal(t, tr.last, again.last, tr.job)
		require.Equal(t, tr.text.String(), again.text.String(), tr.job)
	}
	require.Equal(t, 1, h.Model.Calls("hold-invoke"))
}

// goingAwayOK checks a gRPC stream's end by a stopping gateway: UNAVAILABLE,
// a RetryInfo, and an ErrorInfo naming the stream and the last event the
// client got.
func goingAwayOK(err error, tr *turn) error {
	st := status.Convert(err)
	if st.Code() != codes.Unavailable {
		return fmt.Errorf("%s: the stream ended with %v, want Unavailable", tr.job, err)
	}
	var info *errdetails.ErrorInfo
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			info = d
		case *errdetails.RetryInfo:
			retry = d
		}
	}
	switch {
	case info == nil || retry == nil:
		return fmt.Errorf("%s: %v has no ErrorInfo or no RetryInfo", tr.job, err)
	case info.GetReason() != agent.ErrTypeUnavailable || info.GetMetadata()["stream_id"] != tr.streamID():
		return fmt.Errorf("%s: ErrorInfo %v", tr.job, info)
	case info.GetMetadata()["after_index"] != strconv.FormatInt(tr.last, 10):
		return fmt.Errorf("%s: resume after %s, but the client got %d events", tr.job, info.GetMetadata()["after_index"], tr.last)
	case retry.GetRetryDelay().AsDuration() != time.Second:
		return fmt.Errorf("%s: retry after %s", tr.job, retry.GetRetryDelay().AsDuration())
	}
	return nil
}

// streamSSE starts a turn with POST /v1/turns:stream on gateways[0] and
// follows it to its end, reconnecting as an EventSource does when a
// stream ends early: after the retry time the stream set, with
// Last-Event-ID, on the next gateway, telling onBreak. An early end must
// carry the retry.
func streamSSE(ctx context.Context, gateways []*Process, tr *turn, onEvent, onBreak func()) error {
	g := 0
	for attempt := 0; ; attempt++ {
		var req *http.Request
		var err error
		base := "http://" + gateways[g].HTTPAPIAddr
		if tr.last == 0 && tr.resumed == 0 {
			body := fmt.Sprintf(`{"job_id": %q, "prompt": %q}`, tr.job, promptOf(tr.job))
			req, err = http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/turns:stream", strings.NewReader(body))
		} else {
			req, err = http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/turn/"+heldTenant+"/"+tr.job+"/events:stream", nil)
			req.Header.Set("Last-Event-ID", strconv.FormatInt(tr.last, 10))
		}
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+heldToken)
		retry, err := readSSE(req, tr, onEvent)
		if err == nil && tr.done() {
			return nil
		}
		if err != nil && !errors.Is(err, errNoConnection) {
			return err
		}
		if ctx.Err() != nil || attempt > 100 {
			return fmt.Errorf("turn %s did not end: %w (last event %d)", tr.job, ctx.Err(), tr.last)
		}
		delay := 200 * time.Millisecond
		if err == nil { // the stream ended early: it must say when to come back
			if retry != int(time.Second/time.Millisecond) {
				return fmt.Errorf("turn %s: its event stream ended after event %d with retry %d ms, want 1000", tr.job, tr.last, retry)
			}
			delay = time.Duration(retry) * time.Millisecond
		}
		onBreak()
		tr.resumed++
		g = (g + 1) % len(gateways)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
		}
	}
}

// errNoConnection: the gateway could not be reached.
var errNoConnection = errors.New("no connection")

// readSSE reads one event stream into tr and returns the retry time it set.
func readSSE(req *http.Request, tr *turn, onEvent func()) (int, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errNoConnection, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return 0, fmt.Errorf("turn %s: %s: %s", tr.job, resp.Status, b)
	}
	rd := sse.NewReader(resp.Body)
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return rd.Retry, nil
		}
		if err != nil {
			// A connection cut without a retry is no graceful end.
			return rd.Retry, fmt.Errorf("turn %s: read its event stream: %w", tr.job, err)
		}
		var e agent.Event
		if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
			return rd.Retry, fmt.Errorf("turn %s: event %q: %w", tr.job, ev.Data, err)
		}
		if e.Index != tr.last+1 {
			return rd.Retry, fmt.Errorf("turn %s: event %d after event %d: a gap or a duplicate", tr.job, e.Index, tr.last)
		}
		tr.last = e.Index
		switch e.Kind {
		case agent.EventToken:
			tr.text.WriteString(e.Text)
		case agent.EventStatus:
			tr.status = pb.Status(pb.Status_value["STATUS_"+e.Status])
		}
		onEvent()
	}
}
