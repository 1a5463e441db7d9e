package gateway

import (
	"context"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentflow/agentflow/internal/store"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// ListDeliveries implements pb.AgentServiceServer: the rows of
// delivery_attempts of one turn of the caller's tenant, grouped by
// delivery (GET /v1/turn/<tenant>/<job_id>/deliveries over HTTP). What a
// row holds is what a client may see: the target's name and kind, never
// its URL's secret, its signing key or a bot's token, which no row
// records; an attempt's error is the account deliver.Error gives, with
// the token and the signature scrubbed. A turn of another tenant is
// NotFound, as every turn route answers it.
func (s *Service) ListDeliveries(ctx context.Context, in *pb.ListDeliveriesRequest) (*pb.ListDeliveriesResponse, error) {
	if err := OwnStream(ctx, in.GetStreamId()); err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	tenant := TenantOf(ctx)
	job := strings.TrimPrefix(in.GetStreamId(), "turn/"+tenant+"/")
	attempts, err := s.store.DeliveryAttempts(ctx, tenant, job)
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	return &pb.ListDeliveriesResponse{Deliveries: toPBDeliveries(attempts)}, nil
}

// toPBDeliveries groups attempts, ordered by delivery and attempt, into
// deliveries whose status is their last attempt's outcome.
func toPBDeliveries(attempts []store.DeliveryAttempt) []*pb.Delivery {
	var out []*pb.Delivery
	for _, a := range attempts {
		if len(out) == 0 || out[len(out)-1].DeliveryId != a.DeliveryID {
			out = append(out, &pb.Delivery{DeliveryId: a.DeliveryID, Target: a.Target, Kind: a.Kind})
		}
		d := out[len(out)-1]
		d.Status = a.Outcome
		d.Attempts = append(d.Attempts, &pb.DeliveryAttempt{Attempt: int32(a.Attempt), Outcome: a.Outcome,
			HttpStatus: int32(a.HTTPStatus), Error: a.Error, At: timestamppb.New(a.At)})
	}
	return out
}
