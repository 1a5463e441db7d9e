package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/payloadstore"
	"github.com/agentflow/agentflow/internal/server"
	"github.com/agentflow/agentflow/internal/telemetry"
)

// dialTemporal connects to Temporal. With the standard OTEL_* variables
// set (OTEL_EXPORTER_OTLP_ENDPOINT), the client traces what it starts:
// the turn's workflow and activities continue its StartWorkflow span's
// trace. closeFn closes the client and flushes the spans.
func dialTemporal(ctx context.Context, address, namespace string) (c client.Client, closeFn func(), err error) {
	tracing, err := telemetry.FromEnv(ctx, telemetry.ServiceStarter)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: %w", err)
	}
	flush := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tracing.Shutdown(sctx); err != nil {
			fmt.Fprintln(os.Stderr, "starter:", err)
		}
	}
	interceptors, err := tracing.TemporalInterceptors()
	if err != nil {
		flush()
		return nil, nil, err
	}
	// TLS, an API key and metadata as the worker reads them.
	opts, err := server.TemporalConnection()
	if err != nil {
		flush()
		return nil, nil, err
	}
	opts.HostPort, opts.Namespace, opts.Logger, opts.Interceptors = address, namespace, quietLogger{}, interceptors
	// With the worker's object store (AGENTFLOW_S3_*), a large request
	// goes there and a result kept there is read back, as the worker does.
	payloads, err := payloadDriver(ctx)
	if err != nil {
		flush()
		return nil, nil, err
	}
	if payloads != nil {
		opts.ExternalStorage = payloads.ExternalStorage()
	}
	c, err = client.DialContext(ctx, opts)
	if err != nil {
		flush()
		return nil, nil, fmt.Errorf("connect to temporal at %s: %w", address, err)
	}
	return c, func() { c.Close(); flush() }, nil
}

// payloadDriver keeps the Temporal client's large payloads in the object
// store the AGENTFLOW_S3_* settings name (payloadstore); nil without them.
func payloadDriver(ctx context.Context) (*payloadstore.Driver, error) {
	cfg, err := objstore.ConfigFromEnv()
	if err != nil || !cfg.Enabled() {
		return nil, err
	}
	objects, err := objstore.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return payloadstore.New(objects), nil
}
