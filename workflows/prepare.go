package workflows

import (
	"encoding/json"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// prepareEvent is the name of the custom event each prepare step logs:
// {"step", "label"|"query"|"passages"}. Doors that know it may show it;
// the others pass it on as any custom event, or ignore it.
const prepareEvent = "agentflow.prepare"

// preparing is the agent's prepare phase, run once the turn is loaded.
// It holds no state: its steps and citations are the core's (t.seq,
// t.parts.retrieved), and a next run, which starts past it, runs none.
type preparing struct {
	t *turn // the core: its request, agent, steps and citations
}

func (p *preparing) start(_ workflow.Context, t *turn, _ *contract.TurnCarry) error {
	p.t = t
	return nil
}

func (p *preparing) carry(*contract.TurnCarry) error { return nil }

// loaded runs the prepare phase; a step that fails ends the turn.
func (p *preparing) loaded(ctx workflow.Context) (*agent.TurnError, error) {
	if err := p.prepare(ctx); err != nil {
		return agent.TurnErrorOf(contract.ErrorOf(err)), nil
	}
	return nil, nil
}

// prepare runs the agent's prepare phase (agent.Prepare, seed 002) before
// the turn's first model call, one Prepare activity a step: classify,
// reformulate, retrieve (skipped for a prompt classified
// "conversation"). Each step logs its custom event, and the Web UI and
// the trace show it as its activity. Retrieve stores its context as the
// next step, which the model reads after the prompt, and its citations
// join the turn's. A turn whose agent has no prepare phase runs none of
// it: its history is as before.
func (pr *preparing) prepare(ctx workflow.Context) error {
	t := pr.t
	p := t.agent.Prepare
	if p == nil {
		return nil
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
	})
	in := contract.PrepareInput{TenantID: t.req.TenantID, JobID: t.req.JobID, AgentID: t.agent.ID, AgentVersion: t.agent.Version}
	run := func(step string) (contract.PrepareResult, error) {
		in.Step = step
		workflow.SetCurrentDetails(ctx, "preparing: "+step)
		sctx := workflow.WithActivityOptions(actx, withSummary(workflow.GetActivityOptions(actx), "prepare: "+step))
		var out contract.PrepareResult
		err := workflow.ExecuteActivity(sctx, contract.Prepare, in).Get(ctx, &out)
		return out, err
	}
	label := ""
	if p.Classify.On {
		out, err := run(agent.PrepareClassify)
		if err != nil {
			return err
		}
		label = out.Label
		t.emitPrepare(ctx, map[string]any{"step": agent.PrepareClassify, "label": label})
	}
	if p.Reformulate.On {
		out, err := run(agent.PrepareReformulate)
		if err != nil {
			return err
		}
		in.Query = out.Query
		t.emitPrepare(ctx, map[string]any{"step": agent.PrepareReformulate, "query": out.Query})
	}
	if p.Retrieve != nil && label != agent.LabelConversation {
		t.seq++
		in.Seq = t.seq
		out, err := run(agent.PrepareRetrieve)
		if err != nil {
			return err
		}
		if len(out.Citations) > 0 {
			t.parts.retrieved = append(t.parts.retrieved, out.Citations)
		}
		t.emitPrepare(ctx, map[string]any{"step": agent.PrepareRetrieve, "passages": len(out.Citations), "citations": out.Citations})
	}
	return nil
}

func withSummary(o workflow.ActivityOptions, s string) workflow.ActivityOptions {
	o.Summary = s
	return o
}

func (l *logging) emitPrepare(ctx workflow.Context, v map[string]any) {
	// encoding/json writes a map's keys sorted: the same map, the same
	// bytes.
	raw, _ := json.Marshal(v) //workflowcheck:ignore
	l.emit(ctx, agent.Event{Kind: agent.EventCustom, Custom: &agent.CustomEvent{Name: prepareEvent, ID: v["step"].(string), Value: raw}})
}
