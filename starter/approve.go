package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// matchFlags collects --match PATH=VALUE conditions: the value is JSON
// ("eu" as a string needs its quotes: /region='"eu"'), or else the text
// itself as a string (/region=eu).
type matchFlags []*pb.ArgCondition

func (m *matchFlags) String() string { return "" }

func (m *matchFlags) Set(v string) error {
	path, value, ok := strings.Cut(v, "=")
	if !ok || !strings.HasPrefix(path, "/") {
		return fmt.Errorf("want PATH=VALUE, PATH a JSON Pointer such as /region, got %q", v)
	}
	raw := json.RawMessage(value)
	if !json.Valid(raw) {
		raw, _ = json.Marshal(value) // a string always marshals
	}
	equals := &structpb.Value{}
	if err := protojson.Unmarshal(raw, equals); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	*m = append(*m, &pb.ArgCondition{Path: path, Equals: equals})
	return nil
}

// approveCmd lists a turn's pending approvals, or decides one.
func approveCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("approve", flag.ContinueOnError)
	api, streamID := addTurnFlags(fs)
	approvalID := fs.String("approval", "", "the approval id of the call to decide, as the list and `starter chat` show it: the decision decides that call and no other")
	callID := fs.String("call", "", "the call to decide, by its call id: the one that waits now (without --call or --approval, list what waits)")
	reject := fs.Bool("reject", false, "reject the call instead of approving it")
	reason := fs.String("reason", "", "why (stored with the decision; the model sees it on a rejection)")
	scope := fs.String("for", "", "remember the approval for the rest of the turn or the session (turn|session): the later calls of the tool whose arguments match are approved too")
	var match matchFlags
	fs.Var(&match, "match", "with --for: only calls whose argument at PATH is VALUE (PATH=VALUE, PATH a JSON Pointer; repeat for more)")
	expires := fs.Duration("expires", 0, "with --for: the approval is remembered this long (default: while the turn or session lasts)")
	c, ctx, closeConn, err := api.dialTurn(ctx, fs, args, streamID)
	if err != nil {
		return err
	}
	defer closeConn()
	if *callID == "" && *approvalID == "" {
		return listPending(ctx, c, *streamID, out)
	}
	if *approvalID == "" {
		// The call that waits now with that call id.
		if *approvalID, err = pendingApprovalID(ctx, c, *streamID, *callID); err != nil {
			return err
		}
	}
	req := &pb.ApproveRequest{StreamId: *streamID, CallId: *callID, ApprovalId: *approvalID, Approved: proto.Bool(!*reject),
		Reason: *reason, Scope: *scope, Match: match, ExpiresInSec: int32(expires.Round(time.Second) / time.Second)}
	if req.CallId == "" {
		if req.CallId, err = pendingCallID(ctx, c, *streamID, *approvalID); err != nil {
			return err
		}
	}
	// The decision is recorded under the name of the token's holder.
	resp, err := c.Approve(ctx, req)
	if err != nil {
		return fmt.Errorf("approve: %w", err)
	}
	fmt.Fprintf(out, "%s %s\n", resp.GetCallId(), resp.GetOutcome())
	if resp.GetGrantId() != "" {
		fmt.Fprintf(out, "remembered for the %s as %s (revoke: starter grants --revoke %s)\n", *scope, resp.GetGrantId(), resp.GetGrantId())
	}
	return nil
}

func listPending(ctx context.Context, c pb.AgentServiceClient, streamID string, out io.Writer) error {
	resp, err := c.ListPendingApprovals(ctx, &pb.ListPendingApprovalsRequest{StreamId: streamID})
	if err != nil {
		return fmt.Errorf("approve: %w", err)
	}
	if len(resp.GetApprovals()) == 0 {
		fmt.Fprintln(out, "nothing waits for approval")
	}
	for _, p := range resp.GetApprovals() {
		fmt.Fprintf(out, "%s  %s %s  (approval %s, until %s)\n", p.GetCallId(), p.GetTool(), p.GetArgsJson(), p.GetApprovalId(),
			p.GetDeadline().AsTime().Local().Format("15:04:05"))
	}
	return nil
}

// pendingApprovalID is the approval id of the call callID waiting now; a
// call of a turn from before approvals were bound has none, and is named
// by its call id.
func pendingApprovalID(ctx context.Context, c pb.AgentServiceClient, streamID, callID string) (string, error) {
	resp, err := c.ListPendingApprovals(ctx, &pb.ListPendingApprovalsRequest{StreamId: streamID})
	if err != nil {
		return "", fmt.Errorf("approve: %w", err)
	}
	for _, p := range resp.GetApprovals() {
		if p.GetCallId() == callID {
			if p.GetApprovalId() == "" {
				return callID, nil
			}
			return p.GetApprovalId(), nil
		}
	}
	return "", fmt.Errorf("approve: no call %s waits for approval in %s", callID, streamID)
}

// pendingCallID is the call id of the call waiting with approvalID.
func pendingCallID(ctx context.Context, c pb.AgentServiceClient, streamID, approvalID string) (string, error) {
	resp, err := c.ListPendingApprovals(ctx, &pb.ListPendingApprovalsRequest{StreamId: streamID})
	if err != nil {
		return "", fmt.Errorf("approve: %w", err)
	}
	for _, p := range resp.GetApprovals() {
		if p.GetApprovalId() == approvalID {
			return p.GetCallId(), nil
		}
	}
	return "", fmt.Errorf("approve: no call waits for approval %s in %s: it was decided, or is another turn's", approvalID, streamID)
}

// grantsCmd lists the tenant's remembered approvals, or revokes one.
func grantsCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("grants", flag.ContinueOnError)
	api := addAPIFlags(fs)
	session := fs.String("session", "", "only the grants of this session")
	streamID := fs.String("stream", "", "only the grants this turn made")
	all := fs.Bool("all", false, "revoked and expired grants too")
	revoke := fs.String("revoke", "", "revoke this grant: it decides no call from now on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, ctx, closeConn, err := api.dial(ctx)
	if err != nil {
		return err
	}
	defer closeConn()
	if *revoke != "" {
		g, err := c.RevokeGrant(ctx, &pb.RevokeGrantRequest{GrantId: *revoke})
		if err != nil {
			return fmt.Errorf("grants: %w", err)
		}
		fmt.Fprintf(out, "%s revoked by %s at %s\n", g.GetId(), g.GetRevokedBy(), g.GetRevokedAt().AsTime().Local().Format(time.RFC3339))
		return nil
	}
	resp, err := c.ListGrants(ctx, &pb.ListGrantsRequest{SessionId: *session, StreamId: *streamID, IncludeInactive: *all})
	if err != nil {
		return fmt.Errorf("grants: %w", err)
	}
	if len(resp.GetGrants()) == 0 {
		fmt.Fprintln(out, "no grants")
	}
	for _, g := range resp.GetGrants() {
		fmt.Fprintln(out, describeGrant(g))
	}
	return nil
}

// describeGrant is a grant on one line: id, what it decides, who made it,
// and until when.
func describeGrant(g *pb.Grant) string {
	where := "turn " + g.GetStreamId()
	if g.GetScope() == "session" {
		where = "session " + g.GetSessionId()
	}
	var conds []string
	for _, m := range g.GetMatch() {
		v, _ := json.Marshal(m.GetEquals().AsInterface()) // a Value's always marshals
		conds = append(conds, m.GetPath()+"="+string(v))
	}
	s := fmt.Sprintf("%s  %s of %s in %s", g.GetId(), g.GetTool(), g.GetAgentId(), where)
	if len(conds) > 0 {
		s += " where " + strings.Join(conds, " and ")
	}
	s += "  approved by " + g.GetApprover()
	switch {
	case g.GetRevokedAt() != nil:
		s += ", revoked by " + g.GetRevokedBy()
	case g.GetExpiresAt() != nil:
		s += ", until " + g.GetExpiresAt().AsTime().Local().Format(time.RFC3339)
	}
	return s
}
