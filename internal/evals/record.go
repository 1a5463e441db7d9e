package evals

import (
	"context"
	"fmt"

	"github.com/agentflow/agentflow/internal/agent"
)

// Recorder reads a tenant's recorded turns and stores datasets
// (store.Store).
type Recorder interface {
	Recordings(ctx context.Context, tenantID string, sel agent.RecordSelection) ([]agent.Recording, error)
	PutDataset(ctx context.Context, tenantID, id string, sel agent.RecordSelection, d agent.EvalDataset) (agent.EvalDataset, error)
}

// Record makes a dataset of the tenant's recorded turns that sel takes
// and stores it under id: one case per turn, naming it (agent.Recording)
// and copying none of its text. A selection that takes no turn is
// refused, and nothing is stored.
func Record(ctx context.Context, r Recorder, tenantID, id string, sel agent.RecordSelection) (agent.EvalDataset, error) {
	if err := sel.Validate(); err != nil {
		return agent.EvalDataset{}, err
	}
	recs, err := r.Recordings(ctx, tenantID, sel)
	if err != nil {
		return agent.EvalDataset{}, err
	}
	if len(recs) == 0 {
		return agent.EvalDataset{}, agent.Errorf(agent.CodeInvalid, "no recorded turn of agent %q matches the selection", sel.AgentID)
	}
	d := agent.EvalDataset{Name: id, Agent: sel.AgentID,
		Description: fmt.Sprintf("%d recorded turns of %s from %s to %s", len(recs), sel.AgentID, sel.From.Format("2006-01-02T15:04:05Z07:00"), sel.To.Format("2006-01-02T15:04:05Z07:00"))}
	for i, rec := range recs {
		c := agent.EvalCase{ID: caseID(i, rec.JobID), Recording: &rec}
		if sel.Judge != nil {
			c.Expect.Answer = &agent.AnswerExpect{Judge: sel.Judge}
		}
		d.Cases = append(d.Cases, c)
	}
	if err := d.Validate(); err != nil {
		return agent.EvalDataset{}, err
	}
	return r.PutDataset(ctx, tenantID, id, sel, d)
}

// caseID names a recorded case after its job, when the job id makes a
// case id, else after its place.
func caseID(i int, jobID string) string {
	if len(jobID) <= 48 && agent.ValidateID("id", jobID) == nil {
		return jobID
	}
	return fmt.Sprintf("turn-%d", i+1)
}
