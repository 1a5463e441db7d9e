// Package mcp serves the Model Context Protocol at MCPPath with the
// official MCP Go SDK's Streamable HTTP server: agents as tools, a call as
// a durable turn. Clients of MCP 2025-11-25 and before get sessions, whose
// streams resume across gateways (mcp.go, mcp_resume.go), with
// 2025-11-25's tasks (mcp_session_tasks.go); clients of 2026-07-28 get
// stateless requests and the Tasks extension (mcp_tasks.go, mcp_mrtr.go).
// A task of either is the turn itself, by its stream id, and its
// creator's (mcp_task.go). Both prepare, read and cancel their turns in
// one place (mcp_turn.go), read an agent's arguments by its input schema
// (mcp_input.go), and render a turn's events through
// internal/gateway/projection: a task, and a call's result, from its Held
// projection, its files inline where they fit (mcp_content.go); a call's
// progress notifications and log messages (mcp_log.go) from a Live one.
//
// A door: it builds on the gateway's core and must not import another door
// or the workflows.
package mcp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/projection"
	"github.com/agentflow/agentflow/internal/telemetry"
	"github.com/agentflow/agentflow/internal/words"
)

// The MCP server: the agents a tenant's catalog exposes through MCP
// (expose: [mcp]) are the tools of an MCP server at MCPPath on the HTTP
// API's listener, over Streamable HTTP with the official MCP Go SDK, for
// any MCP host — Claude Desktop, an IDE, another agent. The bearer tokens
// are the gRPC API's, checked by its code; a token needs the user role,
// and every request of a session must come with the token that opened
// it. tools/list is the tenant's exposed agents when the session opens;
// tools/call runs a durable turn of the agent, as Stream does (prepare,
// startPrepared, the follower), and answers with its text, and its JSON
// as structured content when the agent has an output schema. While the
// turn runs, a call with a progress token gets progress notifications —
// tool calls, a call waiting for approval, a preview of the answer — and
// the client's cancellation of the call cancels the turn. A call that
// waits for approval is asked of the client (elicitation) when the client
// can be asked and the caller's token may approve; otherwise it waits for
// an approver over the approvals API, as any turn's. That is MCP
// 2025-11-25's, with sessions; 2026-07-28's, without them and with Tasks,
// is in mcp_tasks.go.

// MCPPath is where the MCP server answers.
const MCPPath = "/mcp"

// Bounds of the MCP server.
const (
	// mcpSessionTimeout closes a session idle this long.
	mcpSessionTimeout = 30 * time.Minute
	// mcpPreviewEvery spaces the text previews of one call's progress.
	mcpPreviewEvery = 250 * time.Millisecond
	// mcpPreviewBytes bounds a text preview.
	mcpPreviewBytes = 200
)

// mcpServer serves a Service's agents over MCP.
type mcpServer struct {
	s      *gateway.Service
	st     Store
	logger *zap.Logger
	// sessions are the sessions this gateway holds.
	sessions mcpSessions
	// ending is done when the gateway ends its streams.
	ending context.Context
	// version is the build's, the servers' serverInfo.version.
	version string
}

// registerMCP adds the MCP server to mux.
func (a *server) registerMCP(mux *http.ServeMux) {
	m := &mcpServer{s: a.Service(), st: a.st, logger: a.Logger(), ending: a.Ending(), version: a.Version()}
	// Sessions live in this gateway's memory (the SDK's); their streams
	// in PostgreSQL (mcpEvents), so that a client whose connection drops
	// resumes a call with Last-Event-ID on any gateway (mcp_resume.go).
	sessions := mcp.NewStreamableHTTPHandler(m.session, &mcp.StreamableHTTPOptions{SessionTimeout: mcpSessionTimeout,
		EventStore: mcpEvents{m}})
	// MCP 2026-07-28 has no sessions (mcp_tasks.go).
	// A request ends when its client leaves (PropagateRequestCancellation):
	// its turn does not.
	sessionless := mcp.NewStreamableHTTPHandler(m.statelessServer, &mcp.StreamableHTTPOptions{Stateless: true,
		PropagateRequestCancellation: true})
	mux.Handle(MCPPath, auth.RequireBearerToken(m.verify, &auth.RequireBearerTokenOptions{
		Scopes: []string{string(gateway.RoleUser)}, AllowMissingExpiration: true,
	})(a.LimitBody(m.front(sessions, sessionless))))
}

// verify checks a bearer token with the gRPC API's code (auth.TokenVerifier).
// The token's roles are its scopes; its tenant, issuer and subject
// identify the user (Token.Principal), so that no other token can use a
// session it opened — not one whose holder has the same name.
func (m *mcpServer) verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	caller, err := m.s.Authenticate(metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+token)))
	if err != nil {
		return nil, fmt.Errorf("%w: %s", auth.ErrInvalidToken, status.Convert(m.s.StatusOf(ctx, err)).Message())
	}
	var scopes []string
	for _, r := range []gateway.Role{gateway.RoleUser, gateway.RoleApprover, gateway.RoleAdmin} {
		if caller.Has(r) {
			scopes = append(scopes, string(r))
		}
	}
	return &auth.TokenInfo{Scopes: scopes, UserID: caller.Principal(), Extra: map[string]any{mcpCallerKey: caller}}, nil
}

// mcpCallerKey holds the caller's Token in auth.TokenInfo.Extra.
const mcpCallerKey = "agentflow.Caller"

// mcpCaller is the context of a request's caller, as the gRPC API's
// interceptors make it; false when the request carries none.
func mcpCaller(ctx context.Context, info *auth.TokenInfo) (context.Context, bool) {
	if info == nil {
		return ctx, false
	}
	caller, ok := info.Extra[mcpCallerKey].(gateway.Token)
	if !ok {
		return ctx, false
	}
	return context.WithValue(ctx, gateway.CallerKey{}, caller), true
}

// session makes the server of a new session (MCP 2025-11-25 and before).
func (m *mcpServer) session(r *http.Request) *mcp.Server { return m.newServer(r, false) }

// newServer makes the server of a session, or of a stateless request:
// its tools are the tenant's agents exposed through MCP, now; a stateless
// server has Tasks too. A tenant whose agents cannot be read gets no
// server (the SDK answers 400), and tries again.
func (m *mcpServer) newServer(r *http.Request, stateless bool) *mcp.Server {
	ctx, ok := mcpCaller(r.Context(), auth.TokenInfoFromContext(r.Context()))
	if !ok {
		return nil
	}
	agents, ok := r.Context().Value(mcpAgentsKey{}).([]agent.Agent)
	var err error
	if !ok {
		agents, err = m.st.ListAgents(ctx, gateway.TenantOf(ctx))
	}
	if err != nil {
		telemetry.Logger(ctx, m.logger).Warn("mcp session refused: agents not read", zap.String("tenant", gateway.TenantOf(ctx)), zap.Error(err))
		return nil
	}
	slices.SortFunc(agents, func(a, b agent.Agent) int { return strings.Compare(a.ID, b.ID) })
	opts := &mcp.ServerOptions{
		Instructions: "Each tool is a durable agent of agentflow: a call runs one turn of the agent, which survives restarts; " +
			"calls that need a person's approval wait for it.",
		GetSessionID: m.newSessionID,
	}
	//lint:ignore SA1019 clients of protocol versions before 2026-07-28 still expect logging
	opts.Capabilities = &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}}
	if stateless {
		opts.Instructions += " A client that declares the Tasks extension gets each call as a task: the turn, by its stream id."
		opts.Capabilities = mcpCapabilities()
	}
	// The tools and resources are those of when the session opens (or the
	// request comes): no list_changed is ever sent.
	opts.Capabilities.Tools = &mcp.ToolCapabilities{}
	opts.Capabilities.Resources = &mcp.ResourceCapabilities{}
	srv := mcp.NewServer(&mcp.Implementation{Name: gateway.ServerName, Title: "agentflow: " + gateway.TenantOf(ctx) + "'s agents",
		Version: m.version}, opts)
	exposed, tools := map[string]bool{}, map[string]agent.Agent{}
	for _, a := range agents {
		if a.Exposed(agent.ExposeMCP) {
			srv.AddTool(mcpTool(a), m.call(a.ID))
			exposed[a.ID], tools[a.ID] = true, a
		}
	}
	if stateless {
		m.addTasks(srv, exposed)
	} else {
		m.addSessionTasks(srv, exposed)
	}
	// Middleware added later runs first. Every tools/call, the Tasks'
	// too, has its arguments read as a prompt (mcp_input.go), and every
	// result its files inline where they fit (mcp_content.go); every
	// handler has its caller.
	srv.AddReceivingMiddleware(withArguments(tools), m.withContent)
	srv.AddReceivingMiddleware(withCaller)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "data", Title: "Data and files of the tenant's turns", URITemplate: mcpBlobTemplate,
		Description: "What turns produced or were given, by its cas:// ref: the images and files of a call's result, a data turn's data.",
	}, m.readBlob)
	return srv
}

// withCaller puts each request's caller in its context, as the gRPC
// API's interceptors do, so that every handler has it (gateway.CallerOf).
func withCaller(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		var info *auth.TokenInfo
		if extra := req.GetExtra(); extra != nil {
			info = extra.TokenInfo
		}
		ctx, ok := mcpCaller(ctx, info)
		if !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "the request carries no bearer token"}
		}
		return next(ctx, method, req)
	}
}

// mcpInput is a tools/call's arguments: the prompt of the agent's turn.
type mcpInput struct {
	Prompt string `json:"prompt"`
}

// mcpInputSchema is every agent tool's input schema.
var mcpInputSchema = json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string","minLength":1,` +
	`"description":"What to ask the agent: the turn's prompt."}},"required":["prompt"],"additionalProperties":false}`)

// mcpTool is an agent as an MCP tool: its id, its description, a prompt
// in — or the arguments of its input schema, when it has one
// (mcp_input.go) —, and its output schema, when it has one, out.
func mcpTool(a agent.Agent) *mcp.Tool {
	t := &mcp.Tool{Name: a.ID, Description: cmp.Or(a.Description, "The agent "+a.ID+" of agentflow."), InputSchema: mcpInputSchema,
		Annotations: &mcp.ToolAnnotations{Title: a.ID, OpenWorldHint: new(true)}}
	if agent.HasOutputSchema(a.InputSchema) {
		t.InputSchema = a.InputSchema
	}
	if len(a.OutputSchema) > 0 {
		t.OutputSchema = a.OutputSchema
	}
	return t
}

// call is the tools/call handler of agent id: one durable turn.
func (m *mcpServer) call(id string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		in, err := decodeMCPInput(req.Params.Arguments)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		p := newMCPProgress(req.Session, req.Params.GetProgressToken(),
			mcpWording{elicits: elicits(req.Session) || mrtr(req.Session), caller: gateway.CallerOf(ctx)})
		if req.Params.RequestState != "" && mrtr(req.Session) {
			return m.again(ctx, req, p) // the call sent again with its input (mcp_mrtr.go)
		}
		// The job id the front handler gave the call (mcpJobID): a call
		// sent again attaches to its turn, and another gateway resumes it.
		var job string
		if req.Extra != nil {
			job = req.Extra.Header.Get(mcpJobHeader)
		}
		if job != "" {
			ctx = gateway.WithDerived(ctx, job) // the front handler's, never the client's
		}
		turn, streamID, err := m.prepare(ctx, id, in.Prompt, job)
		if err != nil {
			return m.toolError(ctx, err), nil
		}
		ctx, release, err := m.s.HoldStream(ctx)
		if err != nil {
			return m.toolError(ctx, err), nil
		}
		defer release()
		round := &mcpRound{task: newMCPTask(streamID, nil)}
		asksByResult, legacy := mrtr(req.Session), !newProtocol(req.Session)
		err = m.s.FollowNew(ctx, turn, nil, func(e agent.Event) error {
			items := round.task.apply(e)
			for _, it := range items {
				if legacy && it.Kind == projection.InputRequired && p.asked(it) {
					go m.ask(ctx, req.Session, streamID, it, nil)
				}
			}
			p.event(ctx, e)
			if asksByResult && round.stop(items, p.caller) {
				return errMCPInput
			}
			return nil
		})
		switch {
		case errors.Is(err, errMCPInput):
			return round.inputRequired(p.caller), nil
		case err != nil && ctx.Err() != nil:
			if legacy {
				// A 2026-07-28 client that leaves only stops its
				// request: the turn goes on, as any turn whose client
				// disconnects; tasks/cancel cancels one.
				m.canceled(ctx, streamID)
			}
			return nil, ctx.Err()
		case err != nil:
			return m.toolError(ctx, err), nil
		}
		return round.task.result(), nil
	}
}

// newProtocol reports whether a session is a request of MCP 2026-07-28 or
// later, served without a session.
func newProtocol(session *mcp.ServerSession) bool {
	p := session.InitializeParams()
	return p != nil && p.ProtocolVersion >= mcpTasksVersion
}

// elicits reports whether the session's client can be asked questions
// (elicitation) during a call: MCP 2026-07-28 has no requests from the
// server, and asks through a task's input_required instead.
func elicits(session *mcp.ServerSession) bool {
	p := session.InitializeParams()
	return p != nil && p.ProtocolVersion < mcpTasksVersion && p.Capabilities != nil && p.Capabilities.Elicitation != nil
}

// ask asks the client, during its call, to decide a tool call that waits
// for approval or to answer an ask_user question (elicitation), and gives
// the turn its answer as the caller's (settle). A client that cancels, or
// cannot answer, leaves the call or the question to another person. meta
// goes in the request's _meta: the task it is for, if any.
func (m *mcpServer) ask(ctx context.Context, session *mcp.ServerSession, streamID string, it projection.Item, meta mcp.Meta) {
	log := telemetry.Logger(ctx, m.logger).With(zap.String("stream_id", streamID), zap.String("call_id", it.Tool.CallID))
	params := mcpElicitation(it)
	params.Meta = meta
	res, err := session.Elicit(ctx, params)
	switch {
	case err != nil && it.Question == nil:
		log.Debug("mcp approval not asked", zap.Error(err))
		return
	case it.Question != nil && (err != nil || res.Action != "accept"):
		log.Debug("mcp question not answered", zap.Error(err))
		return
	}
	if err := m.settle(ctx, streamID, it, res); err != nil {
		// Decided or answered already (another person, a timeout), or
		// not this caller's to answer.
		if it.Question == nil {
			log.Info("mcp approval not taken", zap.Error(err))
		} else {
			log.Info("mcp answer not taken", zap.Error(err))
		}
	}
}

// mcpApprovalSchema is what an elicited approval asks for. Only approved
// true runs the call: approved is false unless the answer says otherwise
// (its default), so an answer that accepts without it refuses the call,
// whichever way the client was asked (elicitation/create, whose answer the
// SDK checks against the schema, or an input request, settle).
var mcpApprovalSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"approved":{"type":"boolean","default":false,"description":"Run the call (true) or refuse it (false)."},` +
	`"reason":{"type":"string","description":"Why, for the record."}}}`)

// decodeMCPInput reads a call's arguments strictly.
func decodeMCPInput(raw json.RawMessage) (mcpInput, error) {
	var in mcpInput
	if len(raw) == 0 {
		return in, errors.New(`arguments are required: {"prompt": "…"}`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, fmt.Errorf(`arguments: want {"prompt": "…"}: %v`, err)
	}
	if dec.More() {
		return in, errors.New("arguments: one JSON object only")
	}
	if strings.TrimSpace(in.Prompt) == "" {
		return in, errors.New("arguments.prompt is required and must not be blank")
	}
	return in, nil
}

// canceled cancels the turn of a call whose client cancelled it
// (notifications/cancelled). A call that ends because its session or the
// gateway closes leaves its turn running: it is durable.
func (m *mcpServer) canceled(ctx context.Context, streamID string) {
	if !errors.Is(context.Cause(ctx), context.Canceled) {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := m.cancel(cctx, streamID, "the MCP client cancelled the call"); err != nil {
		telemetry.Logger(ctx, m.logger).Warn("mcp call cancelled; its turn was not", zap.String("stream_id", streamID), zap.Error(err))
	}
}

// mcpError is a tool result that reports a failure to the model.
func mcpError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// mcpProgress makes a call's progress notifications, when the call asked
// for them with a progress token, from the turn's projection (Live: a
// preview of the text as the model streams it). Each says, in _meta, the
// index of the turn's event it tells of (mcpEventIndexMeta): a gateway
// that resumes the call's stream goes on after it.
type mcpProgress struct {
	mcpWording
	session *mcp.ServerSession
	token   any
	p       *projection.Projection

	n       float64
	text    strings.Builder // the answer's text so far, for its preview
	preview time.Time       // when the last text preview went
}

// newMCPProgress is the progress, told in words w, of a request of
// session whose progress token is token (nil: none asked for).
func newMCPProgress(session *mcp.ServerSession, token any, w mcpWording) *mcpProgress {
	return &mcpProgress{mcpWording: w, session: session, token: token, p: projection.New(projection.Live)}
}

// mcpEventIndexMeta names the turn event's index in a notification's _meta.
const mcpEventIndexMeta = "agentflow/event_index"

// event sends what e says of the turn's progress, if anything, and logs
// it to the client that asked for logs (mcp_log.go).
func (p *mcpProgress) event(ctx context.Context, e agent.Event) {
	msgs, items := p.project(e, true)
	p.log(ctx, e, items)
	if p.token == nil || p.session == nil {
		return
	}
	for _, msg := range msgs {
		// A lost notification costs the client a line of progress, nothing else.
		_ = p.session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{Meta: mcp.Meta{mcpEventIndexMeta: e.Index},
			ProgressToken: p.token, Progress: p.next(), Message: msg})
	}
}

// next is the next notification's progress: a count.
func (p *mcpProgress) next() float64 {
	p.n++
	return p.n
}

// messages projects e and says what its items tell of the turn's
// progress: its words for each, and a preview of the answer's text at
// most every mcpPreviewEvery.
func (p *mcpProgress) messages(e agent.Event) []string {
	msgs, _ := p.project(e, true)
	return msgs
}

// seen projects an event the client was told of already: the preview
// goes on from it.
func (p *mcpProgress) seen(e agent.Event) { p.project(e, false) }

// project projects e: what its items tell (when tell), and the items.
func (p *mcpProgress) project(e agent.Event, tell bool) ([]string, []projection.Item) {
	var out []string
	items := p.p.Add(e)
	for _, it := range items {
		switch it.Kind {
		case projection.Delta:
			if it.Part != projection.Text {
				continue
			}
			p.text.WriteString(it.Text)
			if tell && time.Since(p.preview) >= mcpPreviewEvery {
				p.preview = time.Now()
				out = append(out, words.Clip(p.text.String(), mcpPreviewBytes))
			}
		case projection.Reset:
			p.text.Reset() // the retry's text replaces what the preview showed
		}
		if msg := p.say(it); tell && msg != "" {
			out = append(out, msg)
		}
	}
	return out, items
}

// mcpWording says what an item tells of the turn's progress, to one
// caller: the words of a call's progress notifications and of a task's
// statusMessage.
type mcpWording struct {
	// elicits: the client can be asked (elicitation, or input_required
	// results), so the inputs the caller may give are asked of it.
	elicits bool
	caller  gateway.Token
}

// asked reports whether the client is asked for the input it waits for:
// it can be asked and the caller may give it (one who cannot is told it
// waits for someone who can, who gives it over the approvals or questions
// API, or another door).
func (w mcpWording) asked(it projection.Item) bool {
	return w.elicits && mayDecide(w.caller, it)
}

// say is what it tells of the turn's progress; "" for nothing.
func (w mcpWording) say(it projection.Item) string {
	switch it.Kind {
	case projection.ToolStart:
		return "calling the tool " + it.Tool.Name
	case projection.ToolProgress:
		if it.Tool.Message != "" {
			return "the tool " + it.Tool.Name + ": " + it.Tool.Message
		}
	case projection.ToolResult:
		return "the tool " + it.Tool.Name + " ended " + it.Tool.Status
	case projection.InputRequired:
		return w.waits(it)
	case projection.InputResolved:
		if it.Question != nil {
			return "the question " + it.Tool.CallID + " was " + it.Question.Outcome
		}
		outcome := "decided"
		if it.Event.Approval != nil {
			outcome = it.Event.Approval.Outcome
		}
		return "the call " + it.Tool.CallID + " of " + it.Tool.Name + " was " + outcome
	case projection.Reset:
		return "the model call is retried"
	case projection.Status:
		if it.Status == agent.StreamRetrying {
			return "the model call is retried"
		}
	}
	return ""
}

// waits says what input the turn waits for, and who is to give it.
func (w mcpWording) waits(it projection.Item) string {
	switch {
	case it.Question != nil && w.asked(it):
		return "asking you: " + it.Question.Text
	case it.Question != nil:
		return fmt.Sprintf("waiting for a person to answer: %s (answer it over the questions API: stream %s, call %s)",
			it.Question.Text, it.Event.StreamID, it.Tool.CallID)
	case w.asked(it):
		return fmt.Sprintf("asking you to approve the call %s of %s", it.Tool.CallID, it.Tool.Name)
	}
	return fmt.Sprintf("waiting for a person to approve the call %s of %s (approve it over the approvals API: approval %s, stream %s)",
		it.Tool.CallID, it.Tool.Name, it.Tool.ApprovalID, it.Event.StreamID)
}

// Door serves MCP on the HTTP API's listener.
// New is the MCP door, serving the agents, blobs and resumable streams
// of st.
func New(st Store) gateway.Door {
	return gateway.NewDoor(agent.ChannelMCP, func(mux *http.ServeMux, api *gateway.HTTPAPI) { (&server{HTTPAPI: api, st: st}).registerMCP(mux) })
}

// server is the door on one HTTP API: its handlers are server's methods,
// with the core's helpers and turn service (Service) at hand.
type server struct {
	*gateway.HTTPAPI
	st Store
}
