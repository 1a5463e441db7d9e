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
		Build:      buildAskUser,
	}
}

func buildAskUser(spec agent.Tool, _ Deps) (Tool, error) {
	if _, err := agent.ParseAskUserConfig(spec.Config); err != nil {
		return nil, err
	}
	return askUserTool{}, nil
}

// askUserTool is what the tool runtime holds for an ask_user spec. It
// runs nothing.
type askUserTool struct{}

func (askUserTool) Run(context.Context, Call) (Output, error) {
	return Output{}, agent.Errorf(agent.CodeInvalid,
		"%s calls are answered by a person through the agent's workflow, not run as tool calls; this worker's workflow did not ask, and no one was asked", agent.KindAskUser)
}
