package tools

import (
	"encoding/json"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/approval"
)

// The approval rule. A tool's calls wait for a person when its policy
// (agent.Tool.Approval: never, always or CEL over the call) says so. The
// policy of a tool follows its effect, wherever the tool comes from:
//
//   - catalog and toolkit: the entry's `approval`, else its kind's default
//     (Kind.Approval), which asks for approval of the calls that change
//     things elsewhere;
//   - an entry's derived tools (an MCP server's listing, an API's
//     document: Kind.Resolve): the entry's policy, or stricter
//     (DerivedApproval);
//   - composites, declared or promoted from pipeline runs: the policy of
//     the pipeline tool they came from, evaluated on the pipeline each call
//     would run, and never weaker than the kind's floor, which holds for
//     pipelines that POST (Kind.ApprovalFloor, Kind.ApprovalArgs);
//   - delegation: the child turn's tools keep their own policies, for the
//     same caller (agent.TurnRequest.Caller).
//
// Registry.Approval is the one function that says what a call's policy is.

// Approval returns the policy that decides whether a call of spec with
// args needs approval, and the arguments to evaluate it over (what
// approval.Checker.NeedsApproval takes): the tool's own policy, at
// least its kind's floor, over the call's arguments as its kind presents
// them to policies.
func (r *Registry) Approval(spec agent.Tool, args json.RawMessage) (string, json.RawMessage) {
	k, ok := r.kinds[spec.Kind]
	if !ok {
		return spec.Approval, args
	}
	p := approval.Strictest(spec.Approval, k.ApprovalFloor)
	if k.ApprovalArgs == nil {
		return p, args
	}
	view, err := k.ApprovalArgs(spec, args)
	if err != nil {
		// The call cannot be bound, so it will fail before it does
		// anything; the policy reads the arguments as the model wrote them.
		return p, args
	}
	return p, view
}

// DerivedApproval is the policy of a tool that an entry of kind k stands
// for (Kind.Resolve's output): the entry's policy, or the derived tool's
// own when it is stricter. A kind whose Resolve refines its own default
// (Kind.RefinesApproval: openapi_action derives which operations change
// things from the document) replaces that default; a policy the catalog
// wrote is a floor no derived tool goes below.
func DerivedApproval(k Kind, entry, derived string) string {
	switch {
	case derived == "":
		return entry
	case k.RefinesApproval && entry == k.Approval:
		return derived
	}
	return approval.Strictest(entry, derived)
}
