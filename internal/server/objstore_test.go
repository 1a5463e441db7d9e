package server

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/objstore"
)

// TestObjectStoreAtStart: a process whose object store cannot be reached
// does not start, and says which store; with the store up it starts, and
// the store's endpoint is closed to tools (it holds every tenant's data).
func TestObjectStoreAtStart(t *testing.T) {
	address, namespace := devtest.Temporal(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	nowhere := ln.Addr().String()
	require.NoError(t, ln.Close())
	cfg := Config{
		TemporalAddress: address, Namespace: namespace, TaskQueue: "objstore-start", DatabaseURL: devtest.Database(t),
		HTTPAddr: "off", HTTPAPIAddr: "off", Roles: []string{RoleWorker},
		ObjectStore: objstore.Config{Bucket: "agentflow", Endpoint: "http://" + nowhere, PathStyle: true,
			AccessKeyID: "id", SecretAccessKey: "never-in-an-error"},
	}
	_, err = New(context.Background(), cfg, zaptest.NewLogger(t))
	require.ErrorContains(t, err, `object store: bucket "agentflow" at http://`+nowhere)
	require.ErrorContains(t, err, "connection refused")
	require.NotContains(t, err.Error(), "never-in-an-error")

	cfg.ObjectStore = devtest.ObjectStore(t)
	srv, err := New(context.Background(), cfg, zaptest.NewLogger(t))
	require.NoError(t, err)
	defer srv.Close()
	addrs, err := srv.platformAddrs()
	require.NoError(t, err)
	require.Contains(t, addrs, egress.PlatformAddr{Addr: cfg.ObjectStore.Endpoint[len("http://"):], What: "the object store", From: objstore.EnvEndpoint})
}
