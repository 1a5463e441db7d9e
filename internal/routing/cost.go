package routing

import (
	"cel.dev/cel-go/common/cost"

	"github.com/agentflow/agentflow/internal/agent"
)

// The sizes CEL's static cost estimate assumes of an Input. A condition
// whose estimate for inputs within them is at most CostLimit cannot exceed
// the limit on such inputs, so Route evaluates it without cost tracking.
// Larger inputs are legal; they are evaluated with tracking.
const (
	maxMessageBytes    = agent.MaxPromptBytes // the turn protocol's own limit
	maxFieldBytes      = 1 << 10              // client.user_role, ui_page, tenant_id, caller's name and roles, metadata keys and values
	maxMetadataEntries = 64
)

// bounded reports whether in is within the sizes above.
func bounded(in *Input) bool {
	if len(in.Message) > maxMessageBytes || len(in.UserRole) > maxFieldBytes ||
		len(in.UIPage) > maxFieldBytes || len(in.TenantID) > maxFieldBytes ||
		len(in.Metadata) > maxMetadataEntries || len(in.Caller.NameOf()) > maxFieldBytes ||
		len(in.Caller.RoleList()) > agent.MaxCallerRoles {
		return false
	}
	for _, r := range in.Caller.RoleList() {
		if len(r) > maxFieldBytes {
			return false
		}
	}
	for k, v := range in.Metadata {
		if len(k) > maxFieldBytes || len(v) > maxFieldBytes {
			return false
		}
	}
	return true
}

// inputSizes tells CEL's cost estimator the sizes above. Paths start with
// the variable's name; a map's keys and values follow as further elements.
type inputSizes struct{}

func (inputSizes) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil // CEL's own cost model for every function
}

func (inputSizes) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	path := n.Path()
	if len(path) == 0 {
		return nil
	}
	field := cost.RangedSizeEstimate(0, maxFieldBytes)
	switch path[0] {
	case varMessage:
		s := cost.RangedSizeEstimate(0, maxMessageBytes)
		return &s
	case varClientUserRole, varUIPage, varTenantID, varCallerName:
		return &field
	case varCallerRoles:
		if len(path) > 1 {
			return &field
		}
		l := cost.RangedSizeEstimate(0, agent.MaxCallerRoles)
		l.Elem = &field
		return &l
	case varMetadata:
		if len(path) > 1 {
			return &field
		}
		m := cost.RangedSizeEstimate(0, maxMetadataEntries)
		m.Key, m.Elem = &field, &field
		return &m
	}
	return nil
}
