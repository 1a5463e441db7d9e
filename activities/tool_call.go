package activities

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"go.temporal.io/sdk/activity"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/llm/strictschema"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/tools"
)

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
