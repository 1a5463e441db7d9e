package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// patchScript drives seed 004 §10.1 Test 2: asked for an email whenever
// the price drops below an amount, the model patches process main with a
// condition node and an email node joined to the flights fetch; asked for
// an SMS, it joins a node that does not exist. It answers from the tool's
// result.
const patchScript = `
rules:
  - name: patched
    when: {tool: 'Patched process (?P<tag>\S+): version (?P<version>[0-9]+) \(from [0-9]+\), patch_id (?P<patch>patch-[0-9a-f]+)'}
    reply: {text: 'Done: process ${tag} is at version ${version}, patch ${patch}.'}
  - name: refused
    when: {tool: '^error: (.+)$'}
    reply: {text: 'The change was refused: $1'}
  - name: price-drop
    when: {user: '(?i)add email notification whenever price drops below \$(?P<max>[0-9]+)'}
    reply:
      tool_calls:
        - name: patch_workflow
          arguments: '{"workflow_tag": "main", "patch_spec": {"operations": [
              {"op": "add", "path": "/nodes/-", "value": {"id": "price_check_${max}", "type": "condition", "expr": "price < ${max}"}},
              {"op": "add", "path": "/nodes/-", "value": {"id": "send_email_${max}", "type": "task", "config": {"action": "email", "subject": "Price drop!"}}},
              {"op": "add", "path": "/edges/-", "value": {"from": "fetch_flights", "to": "price_check_${max}"}},
              {"op": "add", "path": "/edges/-", "value": {"from": "price_check_${max}", "to": "send_email_${max}", "condition": "true"}}],
            "description": "Add price drop email notification below ${max}"}}'
  - name: sms
    when: {user: '(?i)send an sms'}
    reply:
      tool_calls:
        - name: patch_workflow
          arguments: '{"workflow_tag": "main", "patch_spec": {"operations": [
              {"op": "add", "path": "/edges/-", "value": {"from": "price_check_500", "to": "send_sms"}}],
            "description": "Text the price drops too"}}'
`

// patchCatalog gives tenant travel process main and an agent that may
// patch it; patch_workflow waits for approval by default.
const patchCatalog = `
tenant: travel
default_agent: planner
tools:
  - name: patch_workflow
    kind: patch_workflow
agents:
  - id: planner
    model: openai:gpt-4o-mini
    tools: [patch_workflow]
    limits: {max_iterations: 4, turn_timeout_sec: 120, approval_timeout_sec: 300}
processes:
  - tag: main
    description: Watch flight prices.
    definition:
      nodes:
        - {id: fetch_flights, type: task, config: {action: http, url: "https://flights.example/search"}}
      edges: []
`

// TestPatchWorkflowApproved: seed 004 §10.1 Test 2 end to end. The
// patch_workflow call waits for a person; approved through the approve
// update, it stores a new version of the process with the email node and
// its edges, audited with the turn, the call and the approver, and the
// model reads the patch_id and version. An invalid patch is refused with
// a message the model reads, and stores nothing. A tool attempt that dies
// after the patch was stored is retried without a second version.
func TestPatchWorkflowApproved(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := &env{Server: testserver.Start(t, testserver.Options{Script: patchScript, Catalogs: []string{patchCatalog}}), t: t}
	st := e.Store()

	// turn runs a prompt to the patch_workflow call, checks that it waits
	// for approval, has ana approve it as turnclient does, and returns
	// the job, the call and the result.
	turn := func(prompt string) (job, callID string, res agent.TurnResult) {
		t.Helper()
		req := agent.TurnRequest{TenantID: "travel", JobID: "patch-" + testserver.RandomID(), Prompt: prompt}
		req.Normalize()
		run, err := turnclient.Start(ctx, e.Client(), e.TaskQueue, req)
		require.NoError(t, err)
		p := e.awaitPending(run.GetID())
		require.Equal(t, "patch_workflow", p.Tool)
		ack, err := turnclient.Approve(ctx, e.Client(), run.GetID(), agent.NewApprovalDecision(p.CallID, true, "", "ana"))
		require.NoError(t, err)
		require.Equal(t, p.CallID, ack.CallID)
		res, err = turnclient.Result(ctx, run)
		require.NoError(t, err)
		require.Equal(t, agent.StatusCompleted, res.Status, res.Error)
		require.Len(t, res.Metadata.ToolCalls, 1)
		require.Equal(t, p.CallID, res.Metadata.ToolCalls[0].CallID)
		return req.JobID, p.CallID, res
	}

	t.Run("approved patch makes a new version", func(t *testing.T) {
		job, callID, res := turn("add email notification whenever price drops below $500")
		require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)

		patch, err := st.ProcessPatchOf(ctx, "travel", job, callID)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("Done: process main is at version 2, patch %s.", patch.PatchID), res.Output,
			"the model read the patch_id and the version")
		require.Equal(t, job, patch.JobID)
		require.Equal(t, contract.TurnWorkflowID("travel", job), patch.WorkflowID, "the audit row names the turn")
		require.Equal(t, callID, patch.CallID)
		require.Equal(t, "ana", patch.Approver)
		require.Equal(t, "Add price drop email notification below 500", patch.Description)
		require.Equal(t, []int{1, 2}, []int{patch.FromVersion, patch.ToVersion})

		v, err := st.Process(ctx, "travel", "main", 0)
		require.NoError(t, err)
		require.Equal(t, 2, v.Version)
		require.Equal(t, agent.ProcessFromPatch, v.Source)
		require.Equal(t, patch.PatchID, v.PatchID)
		require.JSONEq(t, `{
		  "nodes": [
		    {"id": "fetch_flights", "type": "task", "config": {"action": "http", "url": "https://flights.example/search"}},
		    {"id": "price_check_500", "type": "condition", "expr": "price < 500"},
		    {"id": "send_email_500", "type": "task", "config": {"action": "email", "subject": "Price drop!"}}
		  ],
		  "edges": [
		    {"from": "fetch_flights", "to": "price_check_500"},
		    {"from": "price_check_500", "to": "send_email_500", "condition": "true"}
		  ]}`, string(v.Definition))

		steps, err := st.Steps(ctx, "travel", job)
		require.NoError(t, err)
		var read []string
		for _, m := range steps {
			if m.Role == agent.RoleTool {
				read = append(read, m.Content)
			}
		}
		require.Equal(t, []string{fmt.Sprintf("Patched process main: version 2 (from 1), patch_id %s, approved by ana. "+
			"Nodes added: price_check_500, send_email_500; edges added: fetch_flights → price_check_500, "+
			`price_check_500 → send_email_500 (if "true").`, patch.PatchID)}, read, "what the model read of the call")
		e.replay(contract.TurnWorkflowID("travel", job), "turn_patch_workflow")
	})

	t.Run("invalid patch is refused and stores nothing", func(t *testing.T) {
		job, callID, res := turn("send an sms whenever price drops")
		require.Equal(t, agent.ToolError, res.Metadata.ToolCalls[0].Status)
		require.Equal(t, `The change was refused: patch_workflow: process main version 2: the patched definition would be invalid: `+
			`/edges/2/to: no node has id "send_sms" (nodes: fetch_flights, price_check_500, send_email_500); nothing was changed`, res.Output)
		_, err := st.ProcessPatchOf(ctx, "travel", job, callID)
		require.True(t, agent.IsCode(err, agent.CodeNotFound), "%v", err)
		hist, err := st.ProcessHistory(ctx, "travel", "main")
		require.NoError(t, err)
		require.Len(t, hist, 2)
	})

	t.Run("a retried attempt makes one version", func(t *testing.T) {
		// The first attempt to store the call's result fails after the
		// patch was stored, as when a worker dies there; a sequence counts
		// the attempts, since a rolled back insert does not undo it.
		_, err := st.Pool().Exec(ctx, `
CREATE SEQUENCE patch_result_attempts;
CREATE FUNCTION fail_first_patch_result() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.message->>'role' = 'tool' AND NEW.message->>'name' = 'patch_workflow' THEN
    IF nextval('patch_result_attempts') = 1 THEN
      RAISE EXCEPTION 'the attempt dies after the patch';
    END IF;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER fail_first_patch_result BEFORE INSERT ON turn_steps FOR EACH ROW EXECUTE FUNCTION fail_first_patch_result();`)
		require.NoError(t, err)

		job, callID, res := turn("add email notification whenever price drops below $300")
		require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
		var attempts int
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT last_value FROM patch_result_attempts`).Scan(&attempts))
		require.Equal(t, 2, attempts, "the tool ran twice")
		var started []int32
		for _, ev := range e.history(contract.TurnWorkflowID("travel", job)) {
			if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED {
				started = append(started, ev.GetActivityTaskStartedEventAttributes().GetAttempt())
			}
		}
		require.Contains(t, started, int32(2), "ExecuteTool was retried")

		patch, err := st.ProcessPatchOf(ctx, "travel", job, callID)
		require.NoError(t, err)
		require.Equal(t, []int{2, 3}, []int{patch.FromVersion, patch.ToVersion})
		require.Equal(t, fmt.Sprintf("Done: process main is at version 3, patch %s.", patch.PatchID), res.Output)
		hist, err := st.ProcessHistory(ctx, "travel", "main")
		require.NoError(t, err)
		require.Len(t, hist, 3, "one version for the call, however often it ran")
		var patches int
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM process_patches WHERE job_id = $1`, job).Scan(&patches))
		require.Equal(t, 1, patches)
		var def struct {
			Nodes []json.RawMessage `json:"nodes"`
		}
		v, err := st.Process(ctx, "travel", "main", 3)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(v.Definition, &def))
		require.Len(t, def.Nodes, 5)
	})
}
