package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	nexuspb "go.temporal.io/api/nexus/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/proto"
)

// NexusEndpoint is a Nexus endpoint that routes operations to the workers
// polling TaskQueue in Namespace.
type NexusEndpoint struct {
	Name      string
	Namespace string
	TaskQueue string
}

// EnsureNexusEndpoint creates e on the Temporal server c talks to, or
// points the endpoint of that name at e's target when it routes elsewhere
// (a state folder kept from a stack with other names). An endpoint
// already routed there is left as it is.
func EnsureNexusEndpoint(ctx context.Context, c client.Client, e NexusEndpoint) error {
	spec := &nexuspb.EndpointSpec{
		Name: e.Name,
		Target: &nexuspb.EndpointTarget{Variant: &nexuspb.EndpointTarget_Worker_{Worker: &nexuspb.EndpointTarget_Worker{
			Namespace: e.Namespace, TaskQueue: e.TaskQueue}}},
	}
	ops := c.OperatorService()
	_, err := ops.CreateNexusEndpoint(ctx, &operatorservice.CreateNexusEndpointRequest{Spec: spec})
	var exists *serviceerror.AlreadyExists
	if err == nil || !errors.As(err, &exists) {
		if err != nil {
			return fmt.Errorf("nexus endpoint %q: %w", e.Name, err)
		}
		return nil
	}
	list, err := ops.ListNexusEndpoints(ctx, &operatorservice.ListNexusEndpointsRequest{Name: e.Name})
	if err != nil || len(list.GetEndpoints()) != 1 {
		return fmt.Errorf("nexus endpoint %q: find the existing one: %w", e.Name, err)
	}
	have := list.GetEndpoints()[0]
	if proto.Equal(have.GetSpec().GetTarget(), spec.GetTarget()) {
		return nil
	}
	_, err = ops.UpdateNexusEndpoint(ctx, &operatorservice.UpdateNexusEndpointRequest{Id: have.GetId(), Version: have.GetVersion(), Spec: spec})
	if err != nil {
		return fmt.Errorf("nexus endpoint %q: %w", e.Name, err)
	}
	return nil
}

// ensureNexus creates opts' namespaces (the real server's: the dev server
// makes them at start) and endpoints on the stack's server.
func (s *Stack) ensureNexus(ctx context.Context, opts Options) error {
	if opts.TemporalServer {
		for _, ns := range opts.Namespaces {
			if err := EnsureNamespace(ctx, s.TemporalAddress, ns); err != nil {
				return err
			}
		}
	}
	if len(opts.NexusEndpoints) == 0 {
		return nil
	}
	c, err := client.DialContext(ctx, client.Options{HostPort: s.TemporalAddress, Namespace: s.Namespace, Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return fmt.Errorf("nexus endpoints: %w", err)
	}
	defer c.Close()
	for _, e := range opts.NexusEndpoints {
		if err := EnsureNexusEndpoint(ctx, c, e); err != nil {
			return err
		}
	}
	return nil
}
