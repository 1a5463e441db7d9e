package tools

import (
	"context"
	"encoding/json"

	"github.com/agentflow/agentflow/internal/agent"
)

// AskUser returns the ask_user kind: the model asks a person a question
// (free text, or one of a few choices) and waits for the answer, which is
// the call's result. Its calls are not tool calls: the AgentTurn workflow
// holds each one, as it holds a call waiting for approval, until a token
// with the config's role answers (the answer signal or update, Answer
// over gRPC and HTTP), the config's timeout passes, or the turn is
// cancelled. Config (agent.AskUserConfig): role (default user) and
// timeout_sec (default: the agent's approval timeout).
//
// Asking changes nothing, so the kind asks for no approval by default.
// Its Run only refuses, for a call that reaches the tool runtime anyway
// (a worker whose workflow code predates the kind).
func AskUser() Kind {
	return Kind{
		Name: agent.KindAskUser,
		Description: "Ask the person you are working for a question and wait for the answer. " +
			"Ask only what you cannot find out yourself; give choices when there are a few possible answers.",
		Parameters: json.RawMessage(agent.AskUserParameters),
		Config:     json.RawMessage(agent.AskUserConfigSchema),
		Build: buildWorkflowRun(agent.ParseAskUserConfig,
			agent.KindAskUser+" calls are answered by a person through the agent's workflow, not run as tool calls; "+
				"this worker's workflow did not ask, and no one was asked"),
	}
}

// buildWorkflowRun is the Build of a kind whose calls the agent's
// workflow runs itself (ask_user, delegate_to_agent): the spec's config
// is checked with parse, and the runtime holds a workflowRun.
func buildWorkflowRun[C any](parse func(json.RawMessage) (C, error), refusal string) func(agent.Tool, Deps) (Tool, error) {
	return func(spec agent.Tool, _ Deps) (Tool, error) {
		if _, err := parse(spec.Config); err != nil {
			return nil, err
		}
		return workflowRun{refusal: refusal}, nil
	}
}

// workflowRun is what the tool runtime holds for such a kind. It runs
// nothing: a call that reaches it (a worker whose workflow code predates
// the kind) is refused with CodeInvalid, which the model reads as the
// call's result and which is not retried; nothing was started.
type workflowRun struct{ refusal string }

func (w workflowRun) Run(context.Context, Call) (Output, error) {
	return Output{}, agent.Errorf(agent.CodeInvalid, "%s", w.refusal)
}
