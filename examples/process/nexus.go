package process

import (
	"cmp"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow"
)

// NexusName is the type of the example workflow that calls agents
// through a Nexus endpoint.
const NexusName = "AgentProcessNexusExample"

// Endpoint is the Nexus endpoint the example calls by default: the one
// `go tool task up` creates and binds to tenant demo.
const Endpoint = "agents"

// StreamsQuery is the query that answers with the stream ids of the
// steps started so far (NexusResult.Streams), while the process runs.
const StreamsQuery = "streams"

// NexusInput asks the process to answer a question and check the
// answer. It names no tenant: the endpoint's binding decides it.
type NexusInput struct {
	Question string `json:"question"`
	// Endpoint is the Nexus endpoint of agentflow's agents; empty:
	// Endpoint.
	Endpoint string `json:"endpoint,omitempty"`
}

// NexusResult is what the process made of its two agent steps.
type NexusResult struct {
	Answer    string `json:"answer"`
	AnswerRef string `json:"answer_ref"`
	// Streams are the turns' stream ids by step ("answer", "check"),
	// each known once its operation started: a UI follows the turn's
	// tokens by it, through Workflow Streams or any door.
	Streams map[string]string `json:"streams"`
	Check   string            `json:"check"`
}

// AgentProcessNexusExample does what AgentProcessExample does, from any
// namespace: each step is a run_turn operation of the Nexus service
// agentflow.v1.Agents on the input's endpoint. While the answering turn
// runs, the process knows its stream id (query StreamsQuery); then a
// second turn checks the answer, pointing at it by result_ref.
func AgentProcessNexusExample(ctx workflow.Context, in NexusInput) (NexusResult, error) {
	out := NexusResult{Streams: map[string]string{}}
	if in.Question == "" {
		return out, temporal.NewNonRetryableApplicationError("question is required", "InvalidRequest", nil)
	}
	if err := workflow.SetQueryHandler(ctx, StreamsQuery, func() (map[string]string, error) { return out.Streams, nil }); err != nil {
		return out, err
	}
	self := workflow.GetInfo(ctx).WorkflowExecution.ID
	steps := nexusSteps{agents: workflow.NewNexusClient(cmp.Or(in.Endpoint, Endpoint), agentflow.AgentsService), streams: out.Streams}

	// Step 1; its stream id is known as soon as the turn has started.
	answer, err := steps.run(ctx, agentflow.RunTurnInput{
		Prompt: in.Question, JobID: self + "-answer", History: "fresh", NodeID: "answer", RunID: self,
	})
	if err != nil {
		return out, err
	}
	out.Answer, out.AnswerRef = answer.Output, answer.ResultRef

	// Step 2 uses step 1's result, by reference.
	check, err := steps.run(ctx, agentflow.RunTurnInput{
		Prompt: fmt.Sprintf("Check this answer to %q: %s", in.Question, answer.Output),
		JobID:  self + "-check", History: "fresh", NodeID: "check", RunID: self,
		Context: agentflow.TurnContext{PreviousResults: []agentflow.PreviousResult{{NodeID: "answer", ResultRef: answer.ResultRef}}},
	})
	if err != nil {
		return out, err
	}
	out.Check = check.Output
	return out, nil
}

// nexusSteps runs a process's steps through one endpoint and notes each
// step's stream id.
type nexusSteps struct {
	agents  workflow.NexusClient
	streams map[string]string
}

// run runs one step's turn and, once it has started, notes its stream id
// under the step's node id.
func (s nexusSteps) run(ctx workflow.Context, in agentflow.RunTurnInput) (agentflow.TurnResult, error) {
	var res agentflow.TurnResult
	f := s.agents.ExecuteOperation(ctx, agentflow.RunTurn, in, workflow.NexusOperationOptions{
		// What the Web UI lists the step by.
		Summary: "process " + in.NodeID,
	})
	stream, err := agentflow.Stream(ctx, f)
	if err != nil {
		return res, fmt.Errorf("step %s: start: %w", in.NodeID, err)
	}
	if stream != "" { // "": the operation answered at once
		s.streams[in.NodeID] = stream
	}
	if err := f.Get(ctx, &res); err != nil {
		return res, fmt.Errorf("step %s: %w", in.NodeID, err)
	}
	return res, nil
}
