package gateway

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// ListAgents pages.
const (
	defaultAgentsPage = 100
	maxAgentsPage     = 1000
	// maxPageBytes keeps a page well under gRPC's 4 MiB message limit,
	// however large the agents' tool schemas are.
	maxPageBytes = 2 << 20
)

// ListAgents implements pb.AgentServiceServer. Agents come in id order;
// the page token is the last id of the page before.
func (s *Service) ListAgents(ctx context.Context, in *pb.ListAgentsRequest) (*pb.ListAgentsResponse, error) {
	size, err := pageSize(in.GetPageSize(), defaultAgentsPage, maxAgentsPage)
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	after, err := decodePageToken(in.GetPageToken())
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	tenant := TenantOf(ctx)
	agents, err := s.store.ListAgents(ctx, tenant)
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	def, err := s.store.DefaultAgent(ctx, tenant)
	if err != nil && !agent.IsCode(err, agent.CodeNotFound) {
		return nil, s.StatusOf(ctx, err)
	}
	slices.SortFunc(agents, func(a, b agent.Agent) int { return strings.Compare(a.ID, b.ID) })
	out := &pb.ListAgentsResponse{}
	bytes := 0
	for _, a := range agents {
		if a.ID <= after || in.GetAgentId() != "" && a.ID != in.GetAgentId() {
			continue
		}
		if in.GetTool() != "" {
			if _, ok := a.Tool(in.GetTool()); !ok {
				continue
			}
		}
		info := toPBAgent(a, a.ID == def)
		n := proto.Size(info)
		if len(out.Agents) == size || len(out.Agents) > 0 && bytes+n > maxPageBytes {
			out.NextPageToken = encodePageToken(out.Agents[len(out.Agents)-1].GetId())
			break
		}
		out.Agents = append(out.Agents, info)
		bytes += n
	}
	return out, nil
}

func encodePageToken(lastID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(lastID))
}

func decodePageToken(tok string) (string, error) {
	if tok == "" {
		return "", nil
	}
	id, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || agent.ValidateID("page_token", string(id)) != nil {
		return "", agent.Errorf(agent.CodeInvalid, "page_token is not one this service gave out")
	}
	return string(id), nil
}
