// Package nexustools is the warehouse team's Nexus service, in a
// namespace of its own, that an agent calls as tools (catalog kind
// nexus) through an endpoint: Track answers at once (a sync operation);
// Hold puts a shipment on hold until a person at the warehouse releases
// it (an async operation backed by a workflow that waits for a signal),
// and the agent's turn waits for it durably. The team's code knows
// nothing of agentflow but the header reader (agentflow.WhoAskedNexus).
package nexustools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporalnexus"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow"
)

// Namespace, TaskQueue and Service are where the team's worker serves
// the service: `task up` makes the namespace and the endpoint "warehouse"
// into it.
const (
	Namespace = "teams"
	TaskQueue = "warehouse"
	Service   = "warehouse"
)

// ReleaseSignal is the signal a person at the warehouse sends a held
// shipment's workflow, with a note, to release it.
const ReleaseSignal = "release"

// Order names an order, the input of both operations.
type Order struct {
	OrderID string `json:"order_id"`
}

// Parcel is what Track answers.
type Parcel struct {
	OrderID string `json:"order_id"`
	Status  string `json:"status"`
	Carrier string `json:"carrier"`
}

// Released is what a hold answers once released.
type Released struct {
	OrderID string `json:"order_id"`
	Note    string `json:"note"`
}

// HoldShipment is the workflow behind Hold: it waits, durably, for the
// warehouse's release (or its own cancellation, when the agent's turn is
// cancelled), up to a week. Who asked is in its memo, for the Web UI.
func HoldShipment(ctx workflow.Context, in Order) (Released, error) {
	var note string
	workflow.GetSignalChannel(ctx, ReleaseSignal).ReceiveWithTimeout(ctx, 7*24*time.Hour, &note)
	if err := ctx.Err(); err != nil {
		return Released{}, err
	}
	return Released{OrderID: in.OrderID, Note: note}, nil
}

// Track answers where an order's parcel is.
var Track = nexus.NewSyncOperation("track", func(_ context.Context, in Order, _ nexus.StartOperationOptions) (Parcel, error) {
	if in.OrderID == "" {
		return Parcel{}, nexus.HandlerErrorf(nexus.HandlerErrorTypeBadRequest, "an order id is needed")
	}
	return Parcel{OrderID: in.OrderID, Status: "at the warehouse", Carrier: "DHL"}, nil
})

// Hold starts a HoldShipment for the order. Its workflow id is made of
// the call's key, the same on every delivery of the call, so a call the
// caller's side sends again attaches to the hold it made rather than
// making a second.
var Hold = temporalnexus.NewWorkflowRunOperation("hold", HoldShipment,
	func(_ context.Context, in Order, o nexus.StartOperationOptions) (client.StartWorkflowOptions, error) {
		who, ok := agentflow.WhoAskedNexus(o.Header)
		if !ok || who.Key == "" {
			return client.StartWorkflowOptions{}, nexus.HandlerErrorf(nexus.HandlerErrorTypeBadRequest, "a hold needs the call's key")
		}
		sum := sha256.Sum256([]byte(who.TenantID + "\x00" + who.Key))
		return client.StartWorkflowOptions{
			ID:                       "hold-" + in.OrderID + "-" + hex.EncodeToString(sum[:8]),
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			Memo:                     map[string]any{"asked_by": who.Caller, "tenant": who.TenantID},
		}, nil
	})

// Register registers the service and its workflow on the team's worker.
func Register(w worker.Registry) error {
	svc := nexus.NewService(Service)
	if err := svc.Register(Track, Hold); err != nil {
		return err
	}
	w.RegisterNexusService(svc)
	w.RegisterWorkflow(HoldShipment)
	return nil
}
