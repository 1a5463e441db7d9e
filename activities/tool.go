package activities

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/effects"
	"github.com/agentflow/agentflow/internal/eventlog"
	guardpkg "github.com/agentflow/agentflow/internal/guard"
	"github.com/agentflow/agentflow/internal/llm/strictschema"
	"github.com/agentflow/agentflow/internal/metered"
	"github.com/agentflow/agentflow/internal/pipeline"
	"github.com/agentflow/agentflow/internal/redact"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/telemetry"
	"github.com/agentflow/agentflow/internal/tools"
)

// ExecuteTool runs one tool call and stores its result. Errors the model
// can act on (bad arguments, an unknown tool) are results, not failures:
// the model sees them and may try again. Other errors fail the attempt and
// Temporal retries it. A result once stored is what every later attempt
// returns: the tool is not run again. A call the turn ran as a child turn
// (in.Delegated, a delegate_to_agent call) is not run: the child's result
// is stored as the call's; nor is a question the turn asked (in.Asked,
// an ask_user call): its answer is.
func (a *Activities) ExecuteTool(ctx context.Context, in contract.ExecuteToolInput) (contract.ExecuteToolResult, error) {
	ctx = withToolLog(ctx, in)
	defer callHeartbeats(ctx)()
	// What the tool embeds (retrieve, remember, recall) is charged to the
	// turn's tenant, under the call's key.
	ctx = withScope(ctx, metered.Scope{TenantID: in.TenantID, Key: fmt.Sprintf("%s:tool:%d:%s", in.JobID, in.Seq, in.Call.ID),
		AgentID: in.AgentID, AgentVersion: in.AgentVersion, SessionID: in.SessionID}, nil)
	// The turn logged tool_start before scheduling this: let gateways
	// know, while the call goes on, and before the next activity tells
	// them more.
	turnID := activity.GetInfo(ctx).WorkflowExecution.ID
	sinks := a.sinks(ctx, "")
	handed := make(chan struct{})
	go func() {
		defer close(handed)
		sinks.HandOn(ctx, turnID, in.Live)
	}()
	defer func() { <-handed }()
	var stored agent.Message
	err := a.db(ctx, "look up step", func() (err error) {
		stored, err = a.store.Step(ctx, in.TenantID, in.JobID, in.Seq)
		return err
	})
	// prior is the stored unknown outcome of a call a person decided on
	// sending again: the decision's result replaces it.
	var prior *agent.Message
	switch {
	case err == nil && in.Resend != nil && undecided(stored):
		prior = &stored
	case err == nil:
		// An earlier attempt ran the tool (or carried out the decision)
		// and stored the result.
		return a.toolResult(ctx, in.Call.ID, stored, statusOf(stored.Content))
	case !agent.IsCode(err, agent.CodeNotFound):
		return contract.ExecuteToolResult{}, fmt.Errorf("look up step %d: %w", in.Seq, err)
	}
	ag, err := a.agentVersion(ctx, in.TenantID, in.AgentID, in.AgentVersion)
	if err != nil {
		return contract.ExecuteToolResult{}, err
	}
	if in.Delegated != nil {
		// The call ran as a child turn: store what it came to.
		msg, status := delegated(in.Call, *in.Delegated)
		return a.storeToolResult(ctx, in, ranAs(ag, in.Call.Name, msg), status)
	}
	if in.Asked != nil {
		// A person answered the question (or no one did): store that.
		msg, status := asked(*in.Asked)
		return a.storeToolResult(ctx, in, ranAs(ag, in.Call.Name, msg), status)
	}
	if r := in.Resend; r != nil && !r.Approved {
		// Not sent again: the model reads the unknown outcome with the
		// decision, and why.
		return a.storeStep(ctx, in, prior, ranAs(ag, in.Call.Name, notResent(in.Call, prior, r.Message)), agent.ToolUnknown)
	}
	progress := eventlog.StartProgress(ctx, sinks, turnID, in.Call)
	msg, status, step := a.run(ctx, ag, in, progress)
	progress.Close()
	if status == "" {
		if err := ctx.Err(); err != nil {
			// The turn cancelled the call (heartbeats bring that within
			// seconds): the attempt ends canceled, with nothing stored;
			// the turn records the call's result.
			return contract.ExecuteToolResult{}, fmt.Errorf("tool %q: %w", in.Call.Name, err)
		}
		return contract.ExecuteToolResult{}, contract.ToolCallFailed(fmt.Sprintf("tool %q: %s", in.Call.Name, msg.Content), step)
	}
	if r := in.Resend; r != nil && status == agent.ToolUnknown {
		// The second delivery's outcome is unknown too.
		msg.Content = withDecision(msg.Content, r.Message)
	}
	res, err := a.storeStep(ctx, in, prior, ranAs(ag, in.Call.Name, msg), status)
	if err == nil && res.Status == agent.ToolError {
		res.Step = step
	}
	return res, err
}

// storeToolResult stores a call's result as step in.Seq and returns the
// workflow's account of it. An account over the payload budget
// (checkResult) is replaced, before anything is stored, by the tool's
// error saying what was too large: the model reads that, and the turn
// gets a result it can take.
func (a *Activities) storeToolResult(ctx context.Context, in contract.ExecuteToolInput, msg agent.Message, status string) (contract.ExecuteToolResult, error) {
	return a.storeStep(ctx, in, nil, msg, status)
}

// storeStep is storeToolResult in place of over, the stored unknown
// outcome of a call a person decided on sending again (nil: a new step).
// When another attempt replaced it first, what that attempt stored is
// the call's result.
func (a *Activities) storeStep(ctx context.Context, in contract.ExecuteToolInput, over *agent.Message, msg agent.Message, status string) (contract.ExecuteToolResult, error) {
	msg.Role, msg.ToolCallID, msg.Name, msg.Program = agent.RoleTool, in.Call.ID, in.Call.Name, in.Program
	if in.Program != "" {
		msg.ToolCalls = []agent.ToolCall{in.Call} // the program's next run checks it made this call
	}
	if status == agent.ToolError {
		msg.Content = errorPrefix + msg.Content
	}
	res, err := a.toolResult(ctx, in.Call.ID, msg, status)
	if err != nil {
		return contract.ExecuteToolResult{}, err
	}
	if _, err := a.checkResult(ctx, contract.ExecuteTool, res); err != nil {
		msg.Content, msg.Data, msg.CacheHit, status = errorPrefix+err.Error(), nil, false, agent.ToolError
		if res, err = a.toolResult(ctx, in.Call.ID, msg, status); err != nil {
			return contract.ExecuteToolResult{}, err
		}
	}
	if over != nil {
		return a.replaceToolResult(ctx, in, over.Content, msg, res)
	}
	// The tool has run: wait for the database rather than run it again.
	if err := a.db(ctx, "store tool result", func() error { return a.store.PutStep(ctx, in.TenantID, in.JobID, in.Seq, msg) }); err != nil {
		return contract.ExecuteToolResult{}, fmt.Errorf("store result of tool call %q: %w", in.Call.ID, err)
	}
	return res, nil
}

// ranAs is a call's result with the definition of the tool that ran
// (agent.ToolVersion): the pinned agent version's tool of that name.
func ranAs(ag agent.Agent, tool string, msg agent.Message) agent.Message {
	if t, ok := ag.Tool(tool); ok {
		v := t.VersionOf()
		msg.ToolVersion = &v
	}
	return msg
}

// errorPrefix marks a stored tool result as an error, for the model and
// for a retried attempt that reads the step back.
const errorPrefix = "error: "

func statusOf(content string) string {
	switch {
	case strings.HasPrefix(content, errorPrefix):
		return agent.ToolError
	case strings.HasPrefix(content, unknownPrefix):
		return agent.ToolUnknown
	}
	return agent.ToolOK
}

// run executes the call and returns what the model reads of it, and the
// pipeline step that failed it, if one did. An empty status means a
// failure worth retrying, or a call cancelled while it ran; the message's
// content then holds the error.
func (a *Activities) run(ctx context.Context, ag agent.Agent, in contract.ExecuteToolInput, progress *eventlog.Progress) (agent.Message, string, string) {
	spec, ok := ag.Tool(in.Call.Name)
	if !ok && in.Call.Name == agent.RecallStepTool {
		msg, status := a.recallStep(ctx, in)
		return msg, status, ""
	}
	if !ok {
		return agent.Message{Content: notGranted(ag, in.Call.Name)}, agent.ToolError, ""
	}
	if n := len(in.Call.Arguments); n > agent.MaxToolArgumentBytes {
		return agent.Message{Content: fmt.Sprintf("the arguments are %d bytes; the limit is %d", n, agent.MaxToolArgumentBytes)}, agent.ToolError, ""
	}
	call, err := a.call(ctx, ag, in, progress.Report, progress.Emit)
	if err != nil {
		return agent.Message{Content: err.Error()}, "", ""
	}
	var gate *effects.Gate
	if spec.Delivery != agent.DeliveryIdempotent {
		// At most once: each write's intent recorded before it leaves
		// (internal/effects), by the egress transport or the kind.
		k := effects.Key{TenantID: in.TenantID, JobID: in.JobID, Seq: in.Seq}
		if in.Resend != nil {
			// A person approved sending it again: a delivery of its own,
			// past the first one's intent, at most once too.
			k.Resend = in.Resend.ApprovalID
		}
		gate = effects.NewGate(a.store, k)
		ctx = effects.With(ctx, gate)
	}
	out, err, rerr := a.runTool(ctx, spec, in, call, progress.Report)
	if rerr != nil {
		return agent.Message{Content: rerr.Error()}, "", ""
	}
	var failed *pipeline.StepError
	step := ""
	if errors.As(err, &failed) {
		step = string(failed.Op)
	}
	if msg, status, ok := writeOutcome(ctx, in.Call, gate, err); ok {
		if status == agent.ToolUnknown && spec.Reconcile != nil {
			msg, status = a.reconcile(ctx, ag, spec, in, msg)
		}
		return msg, status, step
	}
	switch {
	case err == nil:
		msg, status := a.output(ctx, in, out)
		if g := ag.InjectionGuard(); g != nil {
			msg.Content = a.screen(ctx, *g, in, call, msg.Content)
		}
		return msg, status, ""
	case ctx.Err() != nil:
		// Cancelled: whatever the tool made of it is not its result.
		return agent.Message{Content: err.Error()}, "", step
	case agent.IsCode(err, agent.CodeInvalid), agent.IsCode(err, agent.CodeNotFound):
		content := err.Error()
		if g := ag.InjectionGuard(); g != nil {
			// An error can quote what the tool fetched: it is data too.
			content = a.screen(ctx, *g, in, call, content)
		}
		return agent.Message{Content: content}, agent.ToolError, step
	default:
		a.log(ctx).Warn("tool call failed", zap.Error(err))
		return agent.Message{Content: err.Error()}, "", step
	}
}

// runTool runs a call of spec through the tool runtime, as every call of
// a tool runs whoever makes it (the model, a tool guard): a replay's
// answer from its recording in place of the tool (replayed), the values
// behind PII placeholders for the tools the tenant reveals them to, the
// entry's rate limit (waits reported through report), the call's span,
// the tool registry (Execute: the tenant's egress client, its secrets,
// MCP sessions) and the tenant's PII redaction of what the tool returns,
// before the model, the stored step or the span reads it. toolErr is the
// tool's failure, for the caller to classify; err the runtime's (worth
// retrying).
func (a *Activities) runTool(ctx context.Context, spec agent.Tool, in contract.ExecuteToolInput, call tools.Call, report func(string)) (out tools.Output, toolErr, err error) {
	// A replay's calls are answered from its recording: no tool runs.
	rep, err := a.replayOf(ctx, in)
	if err != nil {
		return tools.Output{}, nil, err
	}
	if rep == nil && in.Replay {
		// The turn's workflow asked no one: whatever the stored turn
		// says, the call does not run; with no recording, it diverges.
		rep = &agent.Replay{}
	}
	if rep != nil {
		return a.replayed(ctx, in, *rep)
	}
	pii, err := a.piiPolicy(ctx, in.TenantID)
	if err != nil {
		return tools.Output{}, nil, err
	}
	scope := redact.Scope(in.SessionID, in.JobID)
	if slices.Contains(pii.Config.Reveal, spec.Entry()) || slices.Contains(pii.Config.Reveal, spec.Name) {
		// The tool the tenant allows gets the values behind placeholders;
		// the span, the events and the history keep the placeholders.
		args, err := a.vault.Reveal(ctx, in.TenantID, scope, string(call.Args))
		if err != nil {
			return tools.Output{}, nil, err
		}
		call.Args = json.RawMessage(args)
	}
	permit, err := a.admitTool(ctx, spec, in, report)
	if err != nil {
		return tools.Output{}, nil, err
	}
	defer permit.Done(ctx, nil)
	spanCtx, span := a.startToolSpan(ctx, in, spec)
	out, toolErr = a.tools.Execute(spanCtx, spec, call)
	if toolErr == nil {
		if err := a.redactOutput(ctx, pii, in.TenantID, scope, &out); err != nil {
			a.endToolSpan(span, tools.Output{}, err)
			return tools.Output{}, nil, err
		}
	}
	a.endToolSpan(span, out, toolErr)
	return out, toolErr, nil
}

// withToolLog is ctx for a tool call: every log line about the call —
// the activity's (a.log) and the tool's own (telemetry.Logger) — says
// whose call it is: tenant, job, agent id and version, tool, call id.
func withToolLog(ctx context.Context, in contract.ExecuteToolInput) context.Context {
	return telemetry.WithLogFields(ctx, zap.String("tenant", in.TenantID), zap.String("job_id", in.JobID),
		zap.String("agent_id", in.AgentID), zap.Int("agent_version", in.AgentVersion),
		zap.String("tool", in.Call.Name), zap.String("call_id", in.Call.ID))
}

// notGranted says which tools the agent has, by toolkit, for a call of
// one it has not.
func notGranted(ag agent.Agent, name string) string {
	var own []string
	kits := map[string][]string{}
	var kitOrder []string
	for _, t := range ag.Tools {
		if t.FromToolkit == "" {
			own = append(own, t.Name)
			continue
		}
		if kits[t.FromToolkit] == nil {
			kitOrder = append(kitOrder, t.FromToolkit)
		}
		kits[t.FromToolkit] = append(kits[t.FromToolkit], t.Name)
	}
	var have []string
	if len(own) > 0 {
		have = append(have, strings.Join(own, ", "))
	}
	for _, k := range kitOrder {
		have = append(have, fmt.Sprintf("toolkit %s: %s", k, strings.Join(kits[k], ", ")))
	}
	if len(have) == 0 {
		return fmt.Sprintf("tool %q is not granted to agent %q, which has no tools", name, ag.ID)
	}
	return fmt.Sprintf("tool %q is not granted to agent %q; it has %s", name, ag.ID, strings.Join(have, "; "))
}

// call is what the runtime offers one call of agent ag for its tenant:
// progress and custom events go to the turn through report and emit (nil:
// dropped).
func (a *Activities) call(ctx context.Context, ag agent.Agent, in contract.ExecuteToolInput, report func(string), emit func(agent.CustomEvent) error) (tools.Call, error) {
	settings, err := a.tenants.Settings(ctx, in.TenantID)
	if err != nil {
		return tools.Call{}, fmt.Errorf("load tenant %q: %w", in.TenantID, err)
	}
	inputs := &turnInputs{a: a, tenantID: in.TenantID, jobID: in.JobID}
	spec, _ := ag.Tool(in.Call.Name)
	return tools.Call{
		// As the tool's schema says them: a null the model wrote for an
		// optional property its strict schema made nullable is the
		// property left out (strictschema.Restore), for every kind.
		Args:     strictschema.Restore(spec.Parameters, json.RawMessage(in.Call.Arguments)),
		TenantID: in.TenantID, JobID: in.JobID, CallID: in.Call.ID,
		WorkflowID: activity.GetInfo(ctx).WorkflowExecution.ID,
		HTTP:       settings.HTTP,
		Data:       inputs.data,
		OpenBlob: func(ctx context.Context, ref string) (tools.Blob, error) {
			ref, err := inputs.resolve(ctx, ref)
			if err != nil {
				return nil, err
			}
			var b *store.BlobReader
			err = a.db(ctx, "open blob", func() (err error) {
				b, err = a.store.OpenTenantBlob(ctx, in.TenantID, ref)
				return err
			})
			if err != nil {
				return nil, err
			}
			return b, nil
		},
		WriteBlob: func(ctx context.Context, r io.Reader, contentType string) (agent.BlobInfo, error) {
			if contentType == "" || contentType == store.DefaultContentType {
				br := bufio.NewReaderSize(r, sniffLen)
				head, _ := br.Peek(sniffLen) // a short stream is sniffed whole; its error comes again on Read
				contentType, _, _ = strings.Cut(http.DetectContentType(head), ";")
				r = br
			}
			// A stream cannot be read twice: a failed write fails the
			// call, and Temporal's retry runs the tool again.
			return a.store.WriteTenantBlob(ctx, in.TenantID, r, contentType, tools.MaxBlobBytes)
		},
		Cache:    toolCache{a: a, tenantID: in.TenantID},
		Progress: report,
		Emit:     emit,
		AgentID:  ag.ID,
		Caller:   inputs.caller,
		Granted: func(name string) bool {
			_, ok := ag.Tool(name)
			return ok
		},
	}, nil
}

// sniffLen is how much of a stream http.DetectContentType reads.
const sniffLen = 512

// turnInputs resolves the refs a tool is given: one by index,
// previous_results[i], names the result_ref of the turn request's
// context.previous_results[i], read from the turn's record the first
// time a call names one.
type turnInputs struct {
	a               *Activities
	tenantID, jobID string
	mu              sync.Mutex
	loaded          bool
	previous        []agent.PreviousResult
	who             *agent.Caller
}

func (t *turnInputs) resolve(ctx context.Context, ref string) (string, error) {
	if !agent.IsInputIndex(ref) {
		return ref, nil
	}
	if err := t.load(ctx); err != nil {
		return "", fmt.Errorf("read the turn's previous results: %w", err)
	}
	return agent.ResolveInput(ref, t.previous)
}

// data reads the data behind ref that the turn's tenant may read, whole:
// the one reader of data by reference for tools (tools.Call.Data) and
// programs (data.read). Another tenant's ref is agent.CodeNotFound.
func (t *turnInputs) data(ctx context.Context, ref string) ([]byte, error) {
	ref, err := t.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	var data []byte
	err = t.a.db(ctx, "read data", func() (err error) {
		data, err = t.a.store.Data(ctx, t.tenantID, ref)
		return err
	})
	return data, err
}

// caller is who asked for the turn, from the credential its request came
// with (stored with the turn).
func (t *turnInputs) caller(ctx context.Context) (*agent.Caller, error) {
	if err := t.load(ctx); err != nil {
		return nil, err
	}
	return t.who, nil
}

// load reads the turn's stored request once.
func (t *turnInputs) load(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.loaded {
		var turn store.Turn
		err := t.a.db(ctx, "load turn", func() (err error) {
			turn, err = t.a.store.Turn(ctx, t.tenantID, t.jobID)
			return err
		})
		if err != nil {
			return err
		}
		t.previous, t.who, t.loaded = turn.Request.Context.PreviousResults, turn.Request.Caller, true
	}
	return nil
}

// output is what the model reads of a tool's output: its text and, when
// it produced data, the data's ref and the data itself when small, else a
// preview. A dataset is always kept by ref, so that later steps, turns and
// workflows can use it; other data when it is large.
func (a *Activities) output(ctx context.Context, in contract.ExecuteToolInput, out tools.Output) (agent.Message, string) {
	parts, note, err := a.files(ctx, in.TenantID, out.Files)
	if err != nil {
		return agent.Message{Content: err.Error()}, ""
	}
	out.Text += note
	msg, status := a.dataOutput(ctx, in, out)
	if status == agent.ToolOK {
		msg.Parts, msg.Citations = parts, out.Citations
	}
	return msg, status
}

// files stores the files a call produced as the tenant's blobs, and
// returns them as parts by ref and a note for the model that names them.
// Files past tools.MaxFiles, or with Data over tools.MaxFileBytes, are
// left out and the note says so. A file the call stored itself (Ref)
// must be the tenant's; it is taken as it is, with its stored type
// unless the tool named one.
func (a *Activities) files(ctx context.Context, tenantID string, files []tools.File) ([]agent.Part, string, error) {
	var parts []agent.Part
	var note strings.Builder
	for i, f := range files {
		if i == tools.MaxFiles {
			fmt.Fprintf(&note, "\n(%d more files left out: a call keeps at most %d)", len(files)-i, tools.MaxFiles)
			break
		}
		if len(f.Data) > tools.MaxFileBytes {
			fmt.Fprintf(&note, "\n(file %d left out: %d bytes; the limit is %d)", i, len(f.Data), tools.MaxFileBytes)
			continue
		}
		info, err := a.storeFile(ctx, tenantID, f)
		if err != nil {
			return nil, "", err
		}
		mime := info.ContentType
		if f.Ref != "" && f.MIMEType != "" {
			mime = f.MIMEType
		}
		p := agent.Part{Type: agent.PartFile, URL: info.Ref, MIMEType: mime, Name: f.Name}
		if agent.IsImageType(mime) {
			p.Type = agent.PartImage
		}
		parts = append(parts, p)
		fmt.Fprintf(&note, "\n%s: %s (%s, %d bytes)", p.Type, info.Ref, mime, info.Size)
	}
	return parts, note.String(), nil
}

// storeFile stores a file's Data as the tenant's blob, or checks that the
// blob it names is the tenant's, and describes it.
func (a *Activities) storeFile(ctx context.Context, tenantID string, f tools.File) (agent.BlobInfo, error) {
	var info agent.BlobInfo
	if f.Ref != "" {
		err := a.db(ctx, "describe tool file", func() (err error) {
			info, err = a.store.TenantBlobInfo(ctx, tenantID, f.Ref)
			return err
		})
		if err != nil {
			return agent.BlobInfo{}, fmt.Errorf("the tool's file %s: %w", agent.Clip(f.Ref, 100), err)
		}
		return info, nil
	}
	mime := f.MIMEType
	if mime == "" || mime == store.DefaultContentType {
		mime, _, _ = strings.Cut(http.DetectContentType(f.Data), ";")
	}
	err := a.db(ctx, "store tool file", func() (err error) {
		info.Ref, err = a.store.PutTenantBlob(ctx, tenantID, f.Data, mime)
		return err
	})
	if err != nil {
		return agent.BlobInfo{}, fmt.Errorf("store the tool's file: %w", err)
	}
	info.ContentType, info.Size = mime, int64(len(f.Data))
	return info, nil
}

// dataOutput is output's text and data part.
func (a *Activities) dataOutput(ctx context.Context, in contract.ExecuteToolInput, out tools.Output) (agent.Message, string) {
	msg := agent.Message{Content: out.Text, CacheHit: out.CacheHit}
	if len(out.Data) == 0 {
		if len(msg.Content) > agent.MaxToolOutputBytes {
			return agent.Message{Content: fmt.Sprintf("the tool's output is %d bytes; the limit is %d", len(msg.Content), agent.MaxToolOutputBytes)}, agent.ToolError
		}
		return msg, agent.ToolOK
	}
	var preview agent.DataPreview
	if out.Preview != nil {
		// A tool's own preview is bounded like the runtime's.
		preview = out.Preview.Bounded()
		preview.Bytes = len(out.Data)
	} else {
		var err error
		if preview, err = agent.PreviewOf(out.Data, "", agent.SampleRows); err != nil {
			return agent.Message{Content: fmt.Sprintf("the tool returned data that is not JSON: %v", err)}, agent.ToolError
		}
	}
	inline := len(out.Data) <= a.dataInlineBytes
	if preview.Type == agent.DataDataset || !inline {
		err := a.db(ctx, "store tool data", func() (err error) {
			preview.Ref, err = a.store.PutTenantBlob(ctx, in.TenantID, out.Data, "application/json")
			return err
		})
		if err != nil {
			return agent.Message{Content: fmt.Sprintf("store the tool's data: %v", err)}, ""
		}
		msg.Data = &preview
	}
	msg.Content = describeData(out.Text, preview, out.Data, inline && (out.ShowData || out.Text == ""), out.CacheHit)
	return msg, agent.ToolOK
}

// describeData writes what the model reads of a tool's data: the tool's
// text, the data's ref when it is kept, and the data itself when show,
// else a preview of a kept dataset.
func describeData(text string, p agent.DataPreview, data []byte, show, cacheHit bool) string {
	var b strings.Builder
	if text != "" {
		b.WriteString(text)
		b.WriteString("\n\n")
	}
	if p.Ref != "" {
		fmt.Fprintf(&b, "data: %s (%s", p.Ref, p.Type)
		if p.Type == agent.DataDataset {
			fmt.Fprintf(&b, ", %d rows", p.RowCount)
			var fields []string
			for _, f := range p.Fields {
				fields = append(fields, f.Name+" "+f.Type)
			}
			if len(fields) > 0 {
				fmt.Fprintf(&b, "; fields: %s", strings.Join(fields, ", "))
			}
		}
		if cacheHit {
			b.WriteString("; from the cache")
		}
		b.WriteString("). Pass the ref as input_ref to use it in a later call.\n")
	}
	if show {
		b.Write(data)
		return b.String()
	}
	if p.Ref == "" {
		return strings.TrimRight(b.String(), "\n")
	}
	fmt.Fprintf(&b, "It is %d bytes", p.Bytes)
	if len(p.Sample) > 0 {
		sample, _ := json.Marshal(p.Sample) // raw JSON rows re-encode as they are
		fmt.Fprintf(&b, "; the first %d rows: %s", len(p.Sample), sample)
	}
	b.WriteString(".")
	return b.String()
}

func (a *Activities) toolResult(ctx context.Context, callID string, msg agent.Message, status string) (contract.ExecuteToolResult, error) {
	preview, cut := truncate(msg.Content, a.previewBytes)
	res := contract.ExecuteToolResult{CallID: callID, Status: status, Preview: preview, Data: msg.Data, CacheHit: msg.CacheHit, Parts: msg.Parts, Citations: msg.Citations}
	if status == agent.ToolUnknown {
		res.Unknown = unknownOf(msg.Content).What
	}
	if cut {
		var ref string
		err := a.db(ctx, "store tool output", func() (err error) {
			ref, err = a.store.PutBlob(ctx, []byte(msg.Content), "text/plain; charset=utf-8")
			return err
		})
		if err != nil {
			return contract.ExecuteToolResult{}, fmt.Errorf("store tool output: %w", err)
		}
		res.Ref = ref
	}
	return res, nil
}

// toolCache keeps a tenant's tool results in the store.
type toolCache struct {
	a        *Activities
	tenantID string
}

func (c toolCache) Get(ctx context.Context, key string) (tools.Output, bool, error) {
	raw, ok, err := c.a.store.CachedTool(ctx, c.tenantID, key, time.Now())
	if err != nil || !ok {
		return tools.Output{}, false, err
	}
	var out cachedOutput
	if err := json.Unmarshal(raw, &out); err != nil {
		return tools.Output{}, false, nil // an entry this build cannot read is a miss
	}
	return tools.Output{Text: out.Text, Data: out.Data, ShowData: out.ShowData, Preview: out.Preview, CacheHit: true}, true, nil
}

func (c toolCache) Put(ctx context.Context, key string, out tools.Output, ttl time.Duration) error {
	if len(out.Files) > 0 {
		return nil // files are kept as blobs, not in cache rows
	}
	raw, err := json.Marshal(cachedOutput{Text: out.Text, Data: out.Data, ShowData: out.ShowData, Preview: out.Preview})
	if err != nil {
		return fmt.Errorf("encode cached output: %w", err)
	}
	return c.a.store.CacheTool(ctx, c.tenantID, key, raw, time.Now().Add(ttl))
}

type cachedOutput struct {
	Text     string             `json:"text"`
	Data     json.RawMessage    `json:"data,omitempty"`
	ShowData bool               `json:"show_data,omitempty"`
	Preview  *agent.DataPreview `json:"preview,omitempty"`
}

// piiPolicy is the tenant's PII redaction (none without a catalog).
func (a *Activities) piiPolicy(ctx context.Context, tenantID string) (redact.Policy, error) {
	settings, err := a.tenants.Settings(ctx, tenantID)
	if agent.IsCode(err, agent.CodeNotFound) {
		return redact.Policy{}, nil
	}
	if err != nil {
		return redact.Policy{}, err
	}
	return redact.Policy{Redactor: settings.PII, Config: settings.PIIConfig}, nil
}

// redactOutput applies the tenant's PII redaction to a tool's output: its
// text, and the strings of its data and of its data's preview.
func (a *Activities) redactOutput(ctx context.Context, pii redact.Policy, tenantID, scope string, out *tools.Output) error {
	if pii.Redactor == nil {
		return nil
	}
	n, err := a.vault.Texts(ctx, pii, tenantID, scope, &out.Text)
	if err != nil {
		return err
	}
	data, nd, err := a.vault.JSON(ctx, pii, tenantID, scope, out.Data)
	if err != nil {
		return err
	}
	out.Data = data
	countGuard(ctx, tenantID, "pii", "redacted", n+nd)
	if out.Preview != nil {
		raw, err := json.Marshal(out.Preview)
		if err != nil {
			return err
		}
		raw, n, err := a.vault.JSON(ctx, pii, tenantID, scope, raw)
		if err != nil {
			return err
		}
		if n > 0 {
			var p agent.DataPreview
			if err := json.Unmarshal(raw, &p); err != nil {
				return fmt.Errorf("redact the data preview: %w", err)
			}
			out.Preview = &p
		}
	}
	return nil
}

// screen gives the model a tool's output delimited as data, acted on by
// the agent's injection guard where it reads as instructions (flagged,
// stripped or withheld), and tells the turn's clients what was found (a
// custom event agentflow.guardrail) and the log how much.
func (a *Activities) screen(ctx context.Context, g agent.InjectionGuard, in contract.ExecuteToolInput, call tools.Call, content string) string {
	inj, err := guardpkg.NewInjection(g)
	if err != nil {
		// Checked when the catalog was applied: screen with the built-in
		// patterns rather than not at all.
		a.log(ctx).Error("injection guard unreadable; screening with the built-in patterns", zap.Error(err))
		inj, _ = guardpkg.NewInjection(agent.InjectionGuard{Action: g.Action})
	}
	s := inj.Screen(in.Call.Name, in.Call.ID, content)
	countGuard(ctx, in.TenantID, "injection", s.Action, s.Found)
	if s.Found > 0 {
		a.log(ctx).Info("tool output read as instructions", zap.Int("passages", s.Found), zap.String("action", s.Action))
		value, _ := json.Marshal(map[string]any{"guard": "injection", "action": s.Action, "passages": s.Found})
		if call.Emit != nil {
			if err := call.Emit(agent.CustomEvent{Name: "agentflow.guardrail", ID: "injection-" + in.Call.ID, Value: value}); err != nil {
				a.log(ctx).Warn("guardrail event not sent", zap.Error(err))
			}
		}
	}
	return s.Text
}

// countGuard counts what a guardrail found (contract.MetricGuardrails).
func countGuard(ctx context.Context, tenantID, guard, outcome string, n int) {
	if n <= 0 {
		return
	}
	activity.GetMetricsHandler(ctx).WithTags(map[string]string{"tenant": tenantID, "guard": guard, "outcome": outcome}).
		Counter(contract.MetricGuardrails).Inc(int64(n))
}
