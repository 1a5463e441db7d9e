package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/telemetry"
)

// Resuming an MCP call on any gateway. The SDK keeps a session in the
// memory of the gateway that opened it; its streams are kept in
// PostgreSQL (mcpEvents, the SDK's EventStore), so a client whose
// connection drops resumes a stream with Last-Event-ID wherever it
// reconnects. On the gateway that holds the session the SDK replays and
// goes on; on another one — the first was killed, or a load balancer
// moved the client — resume replays what was sent, then finishes the
// call's stream itself from the turn's event log: the progress the
// client has not had and the call's result, once. A tools/call's turn has
// a job id made from the session and the call's JSON-RPC id
// (mcpJobID), so the gateway that resumes knows the turn, and a call sent
// again attaches to the turn it started.

// mcpJobHeader carries a tools/call's job id from the front handler
// (mcpFront) to the tool handler, as a header of the request (the SDK
// hands handlers the request's headers). A client's own is dropped.
const mcpJobHeader = "X-Agentflow-Mcp-Job"

// mcpCallKey holds a tools/call's record in the context of its HTTP
// request, where the event store finds it when the call's stream opens.
type mcpCallKey struct{}

// mcpJobID is the job id of a session's tools/call with JSON-RPC id id:
// a derived id keyed by the session (agent.KeyedID), which only the
// session's holder knows, so no one else can name the call's turn first.
func mcpJobID(sessionID string, id json.RawMessage) string {
	return agent.KeyedID(agent.ChannelMCP, []byte(sessionID), string(id))
}

// mcpEnvelope is what the front handler reads of a message.
type mcpEnvelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
		// Task is a task-augmented call's (mcp_session_tasks.go).
		Task json.RawMessage `json:"task"`
	} `json:"params"`
}

// front is what the gateway does before the SDK: a request of MCP
// 2026-07-28 or later goes to the stateless handler (mcp_tasks.go), unless
// its routing header names another task than its body (mcp_headers.go); of a
// session, a tools/call is given its job id and recorded for its stream,
// and a GET that resumes a stream of a session this gateway does not hold
// is answered here. A tools/call's params.task goes to the middleware in
// mcpTaskHeader.
func (m *mcpServer) front(h, sessionless http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(mcpJobHeader)
		r.Header.Del(mcpTaskHeader)
		if r.Method == http.MethodPost && (stateless(r) || r.Header.Get("Mcp-Session-Id") == "") {
			var ok bool
			if r, ok = m.readAgents(w, r); !ok {
				return // the request needs a server, and it cannot have one
			}
		}
		if stateless(r) {
			if refuseTaskNameMismatch(w, r) {
				return
			}
			var srv *mcp.Server
			sessionless.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), mcpServerKey{}, &srv)))
			return
		}
		session := r.Header.Get("Mcp-Session-Id")
		switch {
		case r.Method == http.MethodPost && session != "":
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, "the request body could not be read", http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var env mcpEnvelope
			if json.Unmarshal(body, &env) == nil && env.Method == "tools/call" && len(env.ID) > 0 {
				job := mcpJobID(session, env.ID)
				r.Header.Set(mcpJobHeader, job)
				if task := env.Params.Task; len(task) > 0 && !bytes.Equal(task, []byte("null")) {
					var b bytes.Buffer
					_ = json.Compact(&b, task) // it is part of JSON that decoded
					r.Header.Set(mcpTaskHeader, b.String())
				}
				r = r.WithContext(context.WithValue(r.Context(), mcpCallKey{},
					Stream{RequestID: env.ID, ProgressToken: env.Params.Meta.ProgressToken, JobID: job}))
			}
		case r.Method == http.MethodGet && session != "" && !m.holds(session):
			if r.Header.Get("Last-Event-ID") == "" {
				// The session's standalone stream, reopened here: this
				// gateway has nothing to send on it, but keeps it open, so
				// that the client keeps the session for its calls.
				m.idle(w, r)
				return
			}
			m.resume(w, r, session)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// idle holds a stream open with nothing to send but keep-alive comments,
// until the client leaves or the gateway ends its streams.
func (m *mcpServer) idle(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	tick := time.NewTicker(gateway.DefaultKeepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-m.ending.Done():
			return
		case <-tick.C:
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
}

// sessions are the ids of the sessions this gateway opened.
type mcpSessions struct{ m sync.Map }

func (m *mcpServer) holds(session string) bool {
	_, ok := m.sessions.m.Load(session)
	return ok
}

// newSessionID is a new session's id, recorded as one this gateway holds.
func (m *mcpServer) newSessionID() string {
	var b [16]byte
	_, _ = io.ReadFull(rand.Reader, b[:])
	id := hex.EncodeToString(b[:])
	m.sessions.m.Store(id, struct{}{})
	return id
}

// resume answers a GET with Last-Event-ID for a stream of a session this
// gateway does not hold: what was sent after that event, then, for a
// tools/call whose answer was not sent, the rest of its turn's progress
// and its result.
func (m *mcpServer) resume(w http.ResponseWriter, r *http.Request, session string) {
	ctx, ok := mcpCaller(r.Context(), auth.TokenInfoFromContext(r.Context()))
	if !ok {
		http.Error(w, "the request carries no bearer token", http.StatusUnauthorized)
		return
	}
	streamID, last, ok := parseMCPEventID(r.Header.Get("Last-Event-ID"))
	if !ok {
		http.Error(w, fmt.Sprintf("malformed Last-Event-ID %q", r.Header.Get("Last-Event-ID")), http.StatusBadRequest)
		return
	}
	st, err := m.st.MCPStreamOf(ctx, session, streamID)
	switch {
	case agent.IsCode(err, agent.CodeNotFound):
		http.Error(w, "session not found", http.StatusNotFound)
		return
	case err != nil:
		http.Error(w, m.s.ClientMessage(ctx, err), http.StatusServiceUnavailable)
		return
	}
	if caller := gateway.CallerOf(ctx); st.TenantID != caller.Tenant || st.UserID != caller.Principal() {
		http.Error(w, "session user mismatch", http.StatusForbidden)
		return
	}
	sent, err := m.st.MCPAfter(ctx, session, streamID, last)
	if err != nil {
		http.Error(w, m.s.ClientMessage(ctx, err), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	out := &resumedStream{w: w, streamID: streamID, idx: last}
	for _, data := range sent {
		if !out.write(data) {
			return
		}
	}
	notified, answered, err := m.streamProgress(ctx, session, streamID)
	if err != nil {
		return
	}
	if answered || st.JobID == "" {
		return
	}
	m.finishCall(ctx, session, st, out, notified)
}

// resumedStream is the stream resume writes to: its messages are
// numbered on from the client's Last-Event-ID, as the SDK numbers them.
type resumedStream struct {
	w        http.ResponseWriter
	streamID string
	idx      int
}

// write sends a stored message as the stream's next event; false once
// the client is gone.
func (s *resumedStream) write(data []byte) bool {
	s.idx++
	if data == nil {
		return true // the priming event: nothing to repeat
	}
	if _, err := fmt.Fprintf(s.w, "event: message\nid: %s_%d\ndata: %s\n\n", s.streamID, s.idx, data); err != nil {
		return false
	}
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
	return true
}

// streamProgress reads what the stream holds, the replay included: how
// far its notifications went (the last turn event a notification told
// of), and whether the call was answered.
func (m *mcpServer) streamProgress(ctx context.Context, session, streamID string) (int64, bool, error) {
	all, err := m.st.MCPAfter(ctx, session, streamID, -1)
	if err != nil {
		return 0, false, err
	}
	notified := int64(0)
	answered := false
	for _, data := range all {
		n, isAnswer := mcpMessageProgress(data)
		notified = max(notified, n)
		answered = answered || isAnswer
	}
	return notified, answered, nil
}

// finishCall finishes the stream of a tools/call that was not answered
// from its turn's event log: the progress after what notified told of,
// then the call's result, each stored with the stream as it is sent.
func (m *mcpServer) finishCall(ctx context.Context, session string, st Stream, out *resumedStream, notified int64) {
	streamID := out.streamID
	log := telemetry.Logger(ctx, m.logger)
	turnID := contract.TurnWorkflowID(st.TenantID, st.JobID)
	p := newMCPProgress(nil, tokenOf(st.ProgressToken), mcpWording{})
	t := newMCPTask(turnID, nil)
	err := m.s.Events().Follow(ctx, turnID, 0, func(e agent.Event) error {
		t.apply(e)
		if p.token == nil || e.Index <= notified {
			p.seen(e) // what the client saw: the preview goes on from there
			return nil
		}
		for _, msg := range p.messages(e) {
			data, err := mcpNotification(p.token, p.next(), msg, e.Index)
			if err != nil {
				return err
			}
			if err := m.st.MCPAppend(ctx, session, streamID, data); err != nil {
				return err
			}
			if !out.write(data) {
				return ctx.Err()
			}
		}
		return nil
	})
	if err != nil {
		log.Info("mcp stream not resumed to its end", zap.String("session", session), zap.String("stream_id", turnID), zap.Error(err))
		return
	}
	res, err := json.Marshal(t.result())
	if err != nil {
		return
	}
	answer, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
	}{"2.0", st.RequestID, res})
	if err != nil {
		return
	}
	if err := m.st.MCPAppend(ctx, session, streamID, answer); err != nil {
		log.Info("mcp answer not stored", zap.String("session", session), zap.Error(err))
	}
	out.write(answer)
}

// parseMCPEventID reads an SSE event id of the SDK's form, <stream>_<index>.
func parseMCPEventID(id string) (string, int, bool) {
	stream, n, ok := strings.Cut(id, "_")
	if !ok || stream == "" || strings.Contains(n, "_") {
		return "", 0, false
	}
	idx, err := strconv.Atoi(n)
	if err != nil || idx < 0 {
		return "", 0, false
	}
	return stream, idx, true
}

// mcpMessageProgress reads a stored message: the turn event index a
// progress notification told of (0: none), and whether it is a response.
func mcpMessageProgress(data []byte) (int64, bool) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(data, &msg) != nil {
		return 0, false
	}
	if len(msg.ID) > 0 && (len(msg.Result) > 0 || len(msg.Error) > 0) {
		return 0, true
	}
	n, _ := msg.Params.Meta[mcpEventIndexMeta].(float64)
	return int64(n), false
}

// mcpNotification is a progress notification as the SDK writes one.
func mcpNotification(token any, progress float64, msg string, index int64) ([]byte, error) {
	return json.Marshal(struct {
		JSONRPC string                          `json:"jsonrpc"`
		Method  string                          `json:"method"`
		Params  *mcp.ProgressNotificationParams `json:"params"`
	}{"2.0", "notifications/progress", &mcp.ProgressNotificationParams{
		Meta: mcp.Meta{mcpEventIndexMeta: index}, ProgressToken: token, Progress: progress, Message: msg}})
}

// tokenOf is a stored progress token as the SDK holds one: a string or a
// number; nil for none.
func tokenOf(raw json.RawMessage) any {
	var v any
	_ = json.Unmarshal(raw, &v) // none, null or not JSON: nil
	return v
}

// mcpEvents is the SDK's EventStore over PostgreSQL: a session's streams
// outlive the gateway that holds the session.
type mcpEvents struct{ m *mcpServer }

var _ mcp.EventStore = mcpEvents{}

// Open records a stream, with its call when it answers a tools/call.
func (e mcpEvents) Open(ctx context.Context, sessionID, streamID string) error {
	info := auth.TokenInfoFromContext(ctx)
	cctx, ok := mcpCaller(ctx, info)
	if !ok {
		return fmt.Errorf("open mcp stream %s: no caller", streamID)
	}
	st, _ := ctx.Value(mcpCallKey{}).(Stream)
	st.SessionID, st.StreamID, st.TenantID, st.UserID = sessionID, streamID, gateway.TenantOf(cctx), info.UserID
	return e.m.st.MCPOpen(ctx, st)
}

// Append stores a message of a stream.
func (e mcpEvents) Append(ctx context.Context, sessionID, streamID string, data []byte) error {
	return e.m.st.MCPAppend(context.WithoutCancel(ctx), sessionID, streamID, data)
}

// After yields a stream's messages after index.
func (e mcpEvents) After(ctx context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		msgs, err := e.m.st.MCPAfter(ctx, sessionID, streamID, index)
		if err != nil {
			yield(nil, err)
			return
		}
		for _, data := range msgs {
			if !yield(data, nil) {
				return
			}
		}
	}
}

// SessionClosed drops a closed session's streams.
func (e mcpEvents) SessionClosed(ctx context.Context, sessionID string) error {
	e.m.sessions.m.Delete(sessionID)
	return e.m.st.MCPSessionClosed(context.WithoutCancel(ctx), sessionID)
}
