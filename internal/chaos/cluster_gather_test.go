package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/agentflow/agentflow/internal/checker"
	"github.com/agentflow/agentflow/internal/contract"
)

// records gathers the trial's records once every turn has ended (or
// settleFor passed): what the clients saw, and from their own sources
// what Temporal, the database and the counting APIs hold.
func (w *workload) records(ctx context.Context, trial string, fault checker.Fault) (checker.Records, error) {
	r := checker.Records{Trial: trial, Fault: fault}
	chains, running, err := w.settle(ctx)
	if err != nil {
		return r, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	r.Streams = w.rec.Streams()
	ends := map[string]checker.End{}
	for _, s := range r.Streams {
		if s.End != "" {
			ends[s.Job] = s.End
		}
	}
	for _, t := range w.turns {
		wid := contract.TurnWorkflowID(clTenant, t.Job)
		r.Turns = append(r.Turns, checker.Turn{Job: t.Job, Accepted: t.Accepted, Chains: chains[wid], Running: running[wid], End: ends[t.Job]})
	}
	r.Writes = w.rec.Writes(w.ours(w.e.writes.Writes()), w.ours(w.e.idem.Writes()))
	r.Approvals = slices.Clone(w.approvals)
	r.Probes = slices.Clone(w.probes)
	if r.Results, err = w.results(ctx); err != nil {
		return r, err
	}
	for _, s := range w.sessions {
		s := *s
		if s.Transcript, err = w.transcript(ctx, s.ID); err != nil {
			return r, err
		}
		r.Sessions = append(r.Sessions, s)
	}
	return r, nil
}

// ours are the writes of this trial's turns: the APIs serve every trial.
func (w *workload) ours(writes []checker.Write) []checker.Write {
	return slices.DeleteFunc(writes, func(x checker.Write) bool { return !strings.HasPrefix(x.Job, w.run+"-") })
}

// settleFor bounds the wait for the trial's turns to end.
const settleFor = 5 * time.Minute

// settle waits until visibility lists no run of the trial's turns as
// running, and returns the closed chains and running runs of each
// workflow id.
func (w *workload) settle(ctx context.Context) (chains, running map[string]int, err error) {
	deadline := time.Now().Add(settleFor)
	for {
		chains, running, err = w.visibility(ctx)
		if err == nil && len(running) == 0 || time.Now().After(deadline) {
			return chains, running, err
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// visibility lists the runs of the trial's turn workflows.
func (w *workload) visibility(ctx context.Context) (chains, running map[string]int, err error) {
	chains, running = map[string]int{}, map[string]int{}
	prefix := contract.TurnWorkflowID(clTenant, w.run+"-")
	var token []byte
	for {
		res, err := w.e.temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowId STARTS_WITH %q", prefix), NextPageToken: token, PageSize: 1000})
		if err != nil {
			return nil, nil, fmt.Errorf("list turns: %w", err)
		}
		for _, ex := range res.GetExecutions() {
			id := ex.GetExecution().GetWorkflowId()
			if strings.Contains(id, "-probe-") {
				continue
			}
			switch ex.GetStatus() {
			case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
				running[id]++
			case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
			default:
				chains[id]++
			}
		}
		if token = res.GetNextPageToken(); len(token) == 0 {
			return chains, running, nil
		}
	}
}

// results reads the stored results of the trial's turns.
func (w *workload) results(ctx context.Context) ([]checker.Result, error) {
	rows, err := w.e.db.Query(ctx, `SELECT job_id, count(*), coalesce(max(result_data->>'output'), '')
		FROM agent_results WHERE tenant_id = $1 AND job_id LIKE $2 AND job_id NOT LIKE '%-probe-%' GROUP BY job_id`, clTenant, w.run+"-%")
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	defer rows.Close()
	have := map[string]checker.Result{}
	for rows.Next() {
		var r checker.Result
		if err := rows.Scan(&r.Job, &r.Rows, &r.Answer); err != nil {
			return nil, fmt.Errorf("read results: %w", err)
		}
		have[r.Job] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	var out []checker.Result
	for job := range w.turns {
		r := have[job]
		r.Job = job
		out = append(out, r)
	}
	return out, nil
}

// transcript reads a conversation's messages in order.
func (w *workload) transcript(ctx context.Context, session string) ([]checker.Entry, error) {
	rows, err := w.e.db.Query(ctx, `SELECT job_id, message FROM session_messages WHERE tenant_id = $1 AND session_id = $2 ORDER BY seq`, clTenant, session)
	if err != nil {
		return nil, fmt.Errorf("read transcript: %w", err)
	}
	defer rows.Close()
	var out []checker.Entry
	for rows.Next() {
		var job string
		var raw []byte
		if err := rows.Scan(&job, &raw); err != nil {
			return nil, fmt.Errorf("read transcript: %w", err)
		}
		var m struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("read transcript: %w", err)
		}
		out = append(out, checker.Entry{Job: job, Role: m.Role, Text: messageText(m.Content)})
	}
	return out, rows.Err()
}

// messageText is a stored message's text: a string, or its text parts.
func messageText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct{ Type, Text string }
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}
