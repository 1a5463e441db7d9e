package gateway_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// TestListAgentsPages: agents come in id order, a page at a time; a page
// token the service did not give out is refused.
func TestListAgentsPages(t *testing.T) {
	f := start(t)
	ctx := f.as("tok-user")
	var ids []string
	token := ""
	for range 10 {
		page, err := f.client.ListAgents(ctx, &pb.ListAgentsRequest{PageSize: 2, PageToken: token})
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.GetAgents()), 2)
		for _, a := range page.GetAgents() {
			ids = append(ids, a.GetId())
		}
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	require.Equal(t, []string{"assistant", "limited", "writer"}, ids)

	all, err := f.client.ListAgents(ctx, &pb.ListAgentsRequest{})
	require.NoError(t, err)
	require.Len(t, all.GetAgents(), 3)
	require.Empty(t, all.GetNextPageToken())

	for _, bad := range []*pb.ListAgentsRequest{{PageToken: "not a token!"}, {PageSize: -1}, {PageSize: 1001}} {
		_, err := f.client.ListAgents(ctx, bad)
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", bad)
	}
}
