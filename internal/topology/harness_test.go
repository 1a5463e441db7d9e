package topology

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/scripted"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// The harness of the deploy and shutdown tests: the production topology with a
// model the test holds, clients that stream and resume as
// docs/operations/shutdown.md says clients do, and readers of what the server
// recorded.

const (
	heldTenant = "acme"
	heldToken  = "tok"
)

// heldCatalog: one agent without tools, so that a turn is one model call.
const heldCatalog = `
tenant: acme
default_agent: echo
agents:
  - id: echo
    description: Answers at length.
    model: openai:gpt-4o-mini
    system_prompt: Answer.
`

// heldTail makes an answer 20 words, streamed a word each 20 ms: a model
// call that streams for a while after it is let go.
var heldTail = strings.Repeat(" and more", 10)

// heldModel is the model the processes call: the scripted server behind a
// gate. A request whose prompt is "hold <id>" waits at the gate until
// Release; "quick <id>" is answered at once. Every request is counted by
// its id.
type heldModel struct {
	model *scripted.Server
	srv   *http.Server
	URL   string

	mu      sync.Mutex
	gate    chan struct{}
	waiting int
	calls   map[string]int
}

var promptID = regexp.MustCompile(`(hold|quick) ([a-z0-9-]+)`)

func startHeldModel(t *testing.T) *heldModel {
	t.Helper()
	m := &heldModel{gate: make(chan struct{}), calls: map[string]int{},
		model: scripted.New(&scripted.Script{
			Pacing: scripted.Pacing{ChunkWords: 1, DelayMS: 20},
			Rules: []scripted.Rule{{Name: "answer", When: scripted.When{User: `^(?:hold|quick) (?P<id>[a-z0-9-]+)$`},
				Reply: scripted.Reply{Text: "answer to ${id}" + heldTail}}},
		}, scripted.Options{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	m.URL = "http://" + ln.Addr().String() + "/v1"
	m.srv = &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.Serve(ln) }()
	t.Cleanup(func() { m.Release(); _ = m.srv.Close() })
	return m
}

func (m *heldModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if match := promptID.FindSubmatch(body); match != nil {
		m.mu.Lock()
		m.calls[string(match[2])]++
		gate := m.gate
		hold := string(match[1]) == "hold"
		if hold {
			m.waiting++
		}
		m.mu.Unlock()
		if hold {
			select {
			case <-gate:
			case <-r.Context().Done():
			}
			m.mu.Lock()
			m.waiting--
			m.mu.Unlock()
		}
	}
	m.model.ServeHTTP(w, r)
}

// Waiting is how many held requests wait at the gate.
func (m *heldModel) Waiting() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.waiting
}

// Calls is how many requests the model had for id.
func (m *heldModel) Calls(id string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[id]
}

// Release lets the held requests go, and those that come later.
func (m *heldModel) Release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.gate:
	default:
		close(m.gate)
	}
}

// Hold makes later held requests wait again.
func (m *heldModel) Hold() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gate = make(chan struct{})
}

// heldTopology is a running topology with the held model, its catalog
// applied, a connection to each gateway and a Temporal client.
type heldTopology struct {
	*Topology
	Model  *heldModel
	Conns  []*grpc.ClientConn
	Client client.Client
	dir    string
}

func startHeldTopology(ctx context.Context, t *testing.T, opts Options) *heldTopology {
	t.Helper()
	dir, err := os.MkdirTemp("", "topology-held-*")
	require.NoError(t, err)
	h := &heldTopology{Model: startHeldModel(t), dir: dir}
	opts.Dir, opts.TemporalPort, opts.Logger = dir, -1, zaptest.NewLogger(t)
	opts.Env = append([]string{"OPENAI_BASE_URL=" + h.Model.URL, "OPENAI_API_KEY=held", "AGENTFLOW_SCRIPT=",
		"AGENTFLOW_TOKENS=" + heldToken + "=" + heldTenant + ":user+approver+admin:ops", "AGENTFLOW_LOG_LEVEL=info"}, opts.Env...)
	h.Topology, err = Start(ctx, opts)
	t.Cleanup(func() {
		if t.Failed() {
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), ".log") && (strings.HasPrefix(e.Name(), "worker") || strings.HasPrefix(e.Name(), "gateway")) {
					b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
					t.Logf("%s:\n%s", e.Name(), b)
				}
			}
		}
		_ = os.RemoveAll(dir)
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.Stop()) })
	for _, g := range h.Gateways {
		conn, err := grpc.NewClient(g.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		h.Conns = append(h.Conns, conn)
	}
	h.Client, err = client.DialContext(ctx, client.Options{HostPort: h.Stack.TemporalAddress, Namespace: h.Stack.Namespace})
	require.NoError(t, err)
	t.Cleanup(h.Client.Close)
	_, err = pb.NewCatalogServiceClient(h.Conns[0]).UpsertCatalog(auth(ctx), &pb.UpsertCatalogRequest{Files: map[string]string{"acme.yaml": heldCatalog}})
	require.NoError(t, err)
	return h
}

func auth(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+heldToken)
}

// task runs a `go tool task` recipe of the repository against the
// topology's Temporal server and returns what it printed.
func (h *heldTopology) task(ctx context.Context, env []string, args ...string) (string, error) {
	root, err := devstack.RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", append([]string{"tool", "task", "--silent"}, args...)...)
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), "TEMPORAL_ADDRESS="+h.Stack.TemporalAddress, "TEMPORAL_NAMESPACE="+h.Stack.Namespace), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("go tool task %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// turn is one client's view of a turn's stream.
type turn struct {
	job    string
	last   int64
	text   strings.Builder
	status pb.Status
	// resumed counts the times the client went on after a break.
	resumed int
	// follow: the turn was started elsewhere (a conversation's message);
	// the client only reads it, from its first event.
	follow bool
}

func (tr *turn) streamID() string { return "turn/" + heldTenant + "/" + tr.job }

// want is the answer the model streams for a turn.
func (tr *turn) want() string { return "answer to " + tr.job + heldTail }

// take checks an event's index and keeps what the client shows.
func (tr *turn) take(ev *pb.StreamEvent) error {
	idx := ev.GetMeta().GetEventIndex()
	if idx != tr.last+1 {
		return fmt.Errorf("turn %s: event %d after event %d: a gap or a duplicate", tr.job, idx, tr.last)
	}
	tr.last = idx
	if tok := ev.GetToken(); tok != nil {
		tr.text.WriteString(tok.GetText())
	}
	if s := ev.GetStatus(); s != nil {
		tr.status = s.GetStatus()
	}
	return nil
}

func (tr *turn) done() bool {
	return tr.status == pb.Status_STATUS_COMPLETED || tr.status == pb.Status_STATUS_FAILED || tr.status == pb.Status_STATUS_CANCELED
}

// streamGRPC follows a turn over gRPC from its start (Stream on conns[0])
// to its end, resuming with Resume after the last event it got on the
// next connection whenever a stream ends before the turn does. onEvent,
// when set, is told of every event; onBreak of every break.
func streamGRPC(ctx context.Context, conns []*grpc.ClientConn, tr *turn, onEvent func(*pb.StreamEvent), onBreak func(error)) error {
	c := 0
	for attempt := 0; ; attempt++ {
		api := pb.NewAgentServiceClient(conns[c])
		var st grpc.ServerStreamingClient[pb.StreamEvent]
		var err error
		if tr.last == 0 && tr.resumed == 0 && !tr.follow {
			st, err = api.Stream(auth(ctx), &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: tr.job, Prompt: promptOf(tr.job)}})
		} else {
			st, err = api.Resume(auth(ctx), &pb.ResumeRequest{StreamId: tr.streamID(), AfterIndex: tr.last})
		}
		for err == nil {
			var ev *pb.StreamEvent
			if ev, err = st.Recv(); err != nil {
				break
			}
			if terr := tr.take(ev); terr != nil {
				return terr
			}
			if onEvent != nil {
				onEvent(ev)
			}
		}
		if errors.Is(err, io.EOF) && tr.done() {
			return nil
		}
		if ctx.Err() != nil || attempt > 100 {
			return fmt.Errorf("turn %s did not end: %w (last event %d, last error %v)", tr.job, ctx.Err(), tr.last, err)
		}
		if onBreak != nil {
			onBreak(err)
		}
		tr.resumed++
		c = (c + 1) % len(conns)
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// promptOf is a job's prompt: jobs named hold-… wait at the model's gate.
func promptOf(job string) string {
	if strings.HasPrefix(job, "hold-") {
		return "hold " + job
	}
	return "quick " + job
}

// runQuick runs a turn that the model answers at once through the
// gateway and returns its workflow id once it has completed.
func (h *heldTopology) runQuick(ctx context.Context, t *testing.T, job string) string {
	t.Helper()
	tr := &turn{job: job}
	require.NoError(t, streamGRPC(ctx, h.Conns, tr, nil, nil))
	require.Equal(t, pb.Status_STATUS_COMPLETED, tr.status)
	require.Equal(t, tr.want(), strings.TrimSpace(tr.text.String()))
	h.awaitClosed(ctx, t, tr.streamID())
	return tr.streamID()
}

// awaitClosed waits for a turn whose stream has ended to close: a stream
// ends once the result is stored, its workflow when the task that logs
// the end completes.
func (h *heldTopology) awaitClosed(ctx context.Context, t *testing.T, workflowID string) {
	t.Helper()
	err := h.Client.GetWorkflow(ctx, workflowID, "").Get(ctx, nil)
	require.NoError(t, ctx.Err(), "%s did not close: %v", workflowID, err)
}

type historyEvent = historypb.HistoryEvent

// history is a workflow's events, by the client.
func (h *heldTopology) history(ctx context.Context, t *testing.T, workflowID string) []*historyEvent {
	t.Helper()
	it := h.Client.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []*historyEvent
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		out = append(out, ev)
	}
	return out
}

// localActivity is what the Go SDK records of a local activity in its
// marker's data.
type localActivity struct {
	ActivityType string
	Attempt      int32
}

// localActivityOf decodes the local activity an event's marker records;
// false for other events.
func localActivityOf(t *testing.T, ev *historyEvent) (localActivity, bool) {
	t.Helper()
	var la localActivity
	m := ev.GetMarkerRecordedEventAttributes()
	if m.GetMarkerName() != "LocalActivity" {
		return la, false
	}
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["data"], &la), "marker %d", ev.GetEventId())
	return la, true
}

// handedOff reports whether a CallModel marker records a local call
// handed off to an AwaitModel activity (contract.CallModelResult).
func handedOff(t *testing.T, ev *historyEvent) bool {
	t.Helper()
	var res contract.CallModelResult
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(ev.GetMarkerRecordedEventAttributes().GetDetails()["result"], &res),
		"marker %d", ev.GetEventId())
	return res.HandedOff
}

// pidOf is the process id in a worker identity ("pid@host@…").
func pidOf(identity string) int {
	pid, _, _ := strings.Cut(identity, "@")
	n, _ := strconv.Atoi(pid)
	return n
}

// healthz is the process's /healthz answer: its status code and checks.
func healthz(p *Process) (int, string, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + p.HTTPAddr + "/healthz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var rep struct {
		Checks []struct {
			Name, Status string
		} `json:"checks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return resp.StatusCode, "", err
	}
	var failing []string
	for _, c := range rep.Checks {
		if c.Status == "unavailable" {
			failing = append(failing, c.Name)
		}
	}
	return resp.StatusCode, strings.Join(failing, ","), nil
}
