package agentflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow"
	"github.com/agentflow/agentflow/internal/agent"
)

type orderIn struct {
	OrderID string `json:"order_id" jsonschema:"the order's id"`
	Notify  bool   `json:"notify,omitempty"`
}

type order struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func TestFunc(t *testing.T) {
	lookup := func(_ context.Context, in orderIn) (order, error) {
		if in.OrderID == "boom" {
			return order{}, errors.New("the order service is down")
		}
		return order{ID: in.OrderID, Status: "shipped"}, nil
	}
	kind := agentflow.Func("lookup_order", "Look up an order.", lookup)
	require.Equal(t, "lookup_order", kind.Name)
	require.Equal(t, agent.ApprovalAlways, kind.Approval, "a function may change things: its calls ask by default")
	require.False(t, kind.Local)
	var schema map[string]any
	require.NoError(t, json.Unmarshal(kind.Parameters, &schema))
	require.Equal(t, "object", schema["type"])
	require.Equal(t, []any{"order_id"}, schema["required"], "omitempty fields are optional")
	require.Contains(t, string(kind.Parameters), "the order's id")

	tool, err := kind.Build(agentflow.ToolSpec{Name: "lookup_order", Kind: "lookup_order"}, agentflow.ToolDeps{})
	require.NoError(t, err)
	for _, tc := range []struct {
		name, args, want, invalid, failed string
	}{
		{name: "a call", args: `{"order_id":"A-1"}`, want: `{"id":"A-1","status":"shipped"}`},
		{name: "a field it does not take", args: `{"order_id":"A-1","refund":true}`, invalid: "refund"},
		{name: "a field missing", args: `{}`, invalid: "order_id"},
		{name: "a field of the wrong type", args: `{"order_id":7}`, invalid: "order_id"},
		{name: "the function fails", args: `{"order_id":"boom"}`, failed: "the order service is down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tool.Run(context.Background(), agentflow.Call{Args: json.RawMessage(tc.args)})
			switch {
			case tc.invalid != "":
				var ae *agent.Error
				require.ErrorAs(t, err, &ae)
				require.Equal(t, agent.CodeInvalid, ae.Code, "the model is told to fix its arguments")
				require.Contains(t, err.Error(), tc.invalid)
			case tc.failed != "":
				require.ErrorContains(t, err, tc.failed)
			default:
				require.NoError(t, err)
				require.JSONEq(t, tc.want, out.Text)
			}
		})
	}

	ro := agentflow.Func("echo", "Echo.", func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return in.Text, nil
	}, agentflow.ReadOnly(), agentflow.Local())
	require.Equal(t, agent.ApprovalNever, ro.Approval)
	require.True(t, ro.Local)
	echo, err := ro.Build(agentflow.ToolSpec{}, agentflow.ToolDeps{})
	require.NoError(t, err)
	out, err := echo.Run(context.Background(), agentflow.Call{Args: json.RawMessage(`{"text":"hi"}`)})
	require.NoError(t, err)
	require.Equal(t, "hi", out.Text, "a string result is the text as it is")

	require.Panics(t, func() { agentflow.Func("Bad Name", "", lookup) })
}
