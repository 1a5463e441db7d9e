package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/process"
	"github.com/agentflow/agentflow/internal/telemetry"
)

// patchConfig is patch_workflow's config.
type patchConfig struct {
	// Tags, when given, are the processes the tool may patch; default:
	// every process of the tenant.
	Tags []string `json:"tags"`
}

const patchConfigSchema = `{"type":"object","additionalProperties":false,"properties":{` +
	`"tags":{"type":"array","items":{"type":"string","minLength":1},"uniqueItems":true,` +
	`"description":"the processes (by tag) this tool may patch; default: all of the tenant's"}}}`

// patchAttempts bounds how often a call patches the latest version again
// after another patch came first.
const patchAttempts = 5

// PatchWorkflow returns the patch_workflow kind (seed 004 §5.2): the
// model changes one of the tenant's process definitions for good with
// RFC 6902 operations. The result is checked (internal/process) and
// stored as a new immutable version with an audit record of the turn, the
// call and its approver. Calls wait for a person's approval unless the
// catalog says otherwise.
func PatchWorkflow() Kind {
	return Kind{
		Name: "patch_workflow",
		Description: "Create persistent workflow changes (always/whenever/schedule): patch a process definition " +
			"with JSON Patch operations. The change is checked and kept as a new version of the process.",
		Parameters: json.RawMessage(process.Parameters),
		Config:     json.RawMessage(patchConfigSchema),
		Build:      buildPatch,
		// A patch changes how a process runs from now on: a person decides.
		Approval: agent.ApprovalAlways,
	}
}

func buildPatch(spec agent.Tool, deps Deps) (Tool, error) {
	cfg := patchConfig{}
	if len(spec.Config) > 0 {
		if err := decodeConfig(spec.Config, &cfg, "patch_workflow"); err != nil {
			return nil, err
		}
	}
	for i, tag := range cfg.Tags {
		if err := agent.ValidateID(fmt.Sprintf("tags[%d]", i), tag); err != nil {
			return nil, agent.Errorf(agent.CodeInvalid, "patch_workflow config: %v", err)
		}
	}
	return &patchTool{cfg: cfg, deps: deps}, nil
}

type patchTool struct {
	cfg  patchConfig
	deps Deps
}

func (t *patchTool) Run(ctx context.Context, call Call) (Output, error) {
	p, err := process.DecodePatch(call.Args)
	if err != nil {
		return Output{}, err
	}
	if len(t.cfg.Tags) > 0 && !slices.Contains(t.cfg.Tags, p.Tag) {
		return Output{}, agent.Errorf(agent.CodeInvalid, "this tool may patch the processes %s, not %q", strings.Join(t.cfg.Tags, ", "), p.Tag)
	}
	procs := t.deps.Processes
	for attempt := 1; ; attempt++ {
		// A retried call finds the patch an earlier attempt made.
		prior, err := procs.ProcessPatchOf(ctx, call.TenantID, call.JobID, call.CallID)
		if err == nil {
			return t.retold(ctx, prior), nil
		}
		if !agent.IsCode(err, agent.CodeNotFound) {
			return Output{}, fmt.Errorf("look up the call's patch: %w", err)
		}
		latest, err := procs.Process(ctx, call.TenantID, p.Tag, 0)
		if err != nil {
			return Output{}, err // not found: the model reads which processes there are
		}
		next, err := patched(latest, p)
		if err != nil {
			return Output{}, err
		}
		call.Progress(fmt.Sprintf("storing version %d of process %s", latest.Version+1, p.Tag))
		rec, err := procs.PatchProcess(ctx, agent.ProcessPatch{
			TenantID: call.TenantID, Tag: p.Tag, JobID: call.JobID, WorkflowID: call.WorkflowID, CallID: call.CallID,
			Description: p.Description, Operations: p.OperationsJSON(), FromVersion: latest.Version,
		}, next)
		switch {
		case err == nil:
			telemetry.Logger(ctx, t.deps.Logger).Info("process patched", zap.String("tag", p.Tag),
				zap.Int("version", rec.ToVersion), zap.String("patch_id", rec.PatchID))
			return output(rec, process.Summary(latest.Definition, next)), nil
		case agent.IsCode(err, agent.CodeConflict) && attempt < patchAttempts:
			// Another patch came first: apply the operations to what is
			// the latest now, as if this call had come after it.
			continue
		default:
			return Output{}, err
		}
	}
}

// patched applies p to the latest version and checks the result against
// the rules and the version's schema.
func patched(latest agent.ProcessVersion, p process.Patch) (json.RawMessage, error) {
	sch, err := process.Compile(latest.Schema)
	if err != nil {
		// The stored schema compiled when the catalog was applied; should a
		// later build refuse it, the model reads why, rather than the call
		// being tried again and again.
		return nil, fmt.Errorf("schema of process %q version %d: %w", latest.Tag, latest.Version, err)
	}
	next, err := process.Apply(latest.Definition, p.Operations)
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "process %s version %d: %s; nothing was changed", p.Tag, latest.Version, err)
	}
	if problems := sch.Check(next); len(problems) > 0 {
		return nil, agent.Errorf(agent.CodeInvalid, "process %s version %d: the patched definition would be invalid: %s; nothing was changed",
			p.Tag, latest.Version, problems)
	}
	return next, nil
}

// patchResult is the tool's Data.
type patchResult struct {
	PatchID     string `json:"patch_id"`
	WorkflowTag string `json:"workflow_tag"`
	Version     int    `json:"version"`
	FromVersion int    `json:"from_version"`
	Approver    string `json:"approver,omitempty"`
}

func output(rec agent.ProcessPatch, summary string) Output {
	data, _ := json.Marshal(patchResult{PatchID: rec.PatchID, WorkflowTag: rec.Tag, Version: rec.ToVersion,
		FromVersion: rec.FromVersion, Approver: rec.Approver}) // strings and ints always marshal
	text := fmt.Sprintf("Patched process %s: version %d (from %d), patch_id %s", rec.Tag, rec.ToVersion, rec.FromVersion, rec.PatchID)
	if rec.Approver != "" {
		text += ", approved by " + rec.Approver
	}
	text += "."
	if summary != "" {
		text += " " + upperFirst(summary) + "."
	}
	return Output{Text: text, Data: data}
}

// retold is the output of a patch an earlier attempt of the call made.
func (t *patchTool) retold(ctx context.Context, rec agent.ProcessPatch) Output {
	summary := ""
	from, ferr := t.deps.Processes.Process(ctx, rec.TenantID, rec.Tag, rec.FromVersion)
	to, terr := t.deps.Processes.Process(ctx, rec.TenantID, rec.Tag, rec.ToVersion)
	if ferr == nil && terr == nil {
		summary = process.Summary(from.Definition, to.Definition)
	}
	return output(rec, summary)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
