// Package activitytools is the orders team's own Temporal code that an
// agent calls as tools: activities on the team's task queue, in the
// team's worker, which agentflow's turns schedule there (catalog kind
// activity). LookupOrder only reads; RefundOrder writes, and makes each
// refund once however often it is delivered: it keys its write by the
// call's key that every call carries (agentflow.WhoAsked), as Temporal
// advises of every activity, so its catalog entry can declare delivery:
// idempotent and be retried after a worker dies under it.
package activitytools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow"
)

// TaskQueue is the queue the team's worker polls.
const TaskQueue = "orders"

// Order is what LookupOrder answers.
type Order struct {
	OrderID string `json:"order_id"`
	Status  string `json:"status"`
	Total   string `json:"total"`
}

// Refund is what RefundOrder answers: the refund made for a call, the
// first time or again.
type Refund struct {
	OrderID  string `json:"order_id"`
	Refunded bool   `json:"refunded"`
	Reason   string `json:"reason"`
	// For is whom the agent's turn answered when it asked.
	For string `json:"for,omitempty"`
}

// Orders is the team's order service. Refunds are files in Ledger, one
// per call's key: the far side's record, which a test counts.
type Orders struct {
	Ledger string
	// Work is how long a refund takes before it is recorded (heartbeating
	// meanwhile): a real payment provider's call.
	Work time.Duration
}

// LookupOrder looks an order up. Only orders starting with A exist.
func (o *Orders) LookupOrder(_ context.Context, in struct {
	OrderID string `json:"order_id"`
}) (Order, error) {
	if len(in.OrderID) == 0 || in.OrderID[0] != 'A' {
		// Not worth retrying: the model reads it as the tool's error.
		return Order{}, temporal.NewNonRetryableApplicationError("no order "+in.OrderID, "NotFound", nil)
	}
	return Order{OrderID: in.OrderID, Status: "delivered", Total: "42.00 EUR"}, nil
}

// RefundOrder refunds an order, once per call: a delivery whose key the
// ledger already holds answers with the refund that was made.
func (o *Orders) RefundOrder(ctx context.Context, in struct {
	OrderID string `json:"order_id"`
	Reason  string `json:"reason"`
}) (Refund, error) {
	who, ok := agentflow.WhoAsked(ctx)
	if !ok || who.Key == "" {
		return Refund{}, temporal.NewNonRetryableApplicationError("a refund needs the call's key", "NoKey", nil)
	}
	sum := sha256.Sum256([]byte(who.TenantID + "\x00" + who.Key))
	path := filepath.Join(o.Ledger, hex.EncodeToString(sum[:16])+".json")
	if r, err := readRefund(path); err == nil {
		return r, nil // made already, by an earlier delivery
	}
	for end := time.Now().Add(o.Work); time.Now().Before(end); {
		activity.RecordHeartbeat(ctx)
		select {
		case <-ctx.Done():
			return Refund{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	r := Refund{OrderID: in.OrderID, Refunded: true, Reason: in.Reason, For: who.Caller}
	b, err := json.Marshal(r)
	if err != nil {
		return Refund{}, err
	}
	// O_EXCL: of two deliveries racing, one records the refund.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return readRefund(path)
	}
	if err != nil {
		return Refund{}, fmt.Errorf("record refund: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return Refund{}, fmt.Errorf("record refund: %w", err)
	}
	return r, f.Close()
}

func readRefund(path string) (Refund, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Refund{}, err
	}
	var r Refund
	return r, json.Unmarshal(b, &r)
}

// ReceivedSignal is the signal the warehouse sends a return's workflow,
// with a note, once the parcel is back.
const ReceivedSignal = "received"

// Return is what AwaitReturn answers once the parcel is back.
type Return struct {
	OrderID  string `json:"order_id"`
	Received bool   `json:"received"`
	Note     string `json:"note"`
}

// AwaitReturn is a return in progress, a tool that waits (catalog kind
// workflow): the agent's turn starts it as its child, under an id of the
// call's (so a call is one return however often it is sent), and waits,
// durably, until the warehouse signals that the parcel is back, up to
// 30 days; cancelling the turn cancels the return.
func AwaitReturn(ctx workflow.Context, in struct {
	OrderID string `json:"order_id"`
}) (Return, error) {
	var note string
	workflow.GetSignalChannel(ctx, ReceivedSignal).ReceiveWithTimeout(ctx, 30*24*time.Hour, &note)
	if err := ctx.Err(); err != nil {
		return Return{}, err
	}
	return Return{OrderID: in.OrderID, Received: note != "", Note: note}, nil
}

// Register registers the team's activities and workflow under the names
// the catalog gives them (LookupOrder, RefundOrder, AwaitReturn).
func Register(w worker.Registry, o *Orders) {
	w.RegisterActivity(o)
	w.RegisterWorkflow(AwaitReturn)
}
