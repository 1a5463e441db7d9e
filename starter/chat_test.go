package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/registry"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/server"
)

const chatStory = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty"

// proxy forwards TCP connections to a backend and can cut them all.
type proxy struct {
	ln      net.Listener
	backend string
	mu      sync.Mutex
	conns   []net.Conn
}

func newProxy(t *testing.T, backend string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, backend: backend}
	t.Cleanup(func() { _ = ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", backend)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, b)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(b, c); _ = b.Close() }()
			go func() { _, _ = io.Copy(c, b); _ = c.Close() }()
		}
	}()
	return p
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// cutWriter cuts the proxy once the output holds the marker.
type cutWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	cut    func()
	done   bool
}

func (w *cutWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(b)
	if !w.done && strings.Contains(w.buf.String(), w.marker) {
		w.done = true
		go w.cut()
	}
	return n, err
}

// testServer runs a worker and gateway on the test stack with a scripted
// model and a one-agent catalog for tenant demo.
type testServer struct {
	srv       *server.Server
	taskQueue string
	address   string
	namespace string
}

func startServer(t *testing.T, modelScript string) testServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	address, namespace := devtest.Temporal(t)
	sc, err := scripted.Parse([]byte(modelScript))
	require.NoError(t, err)
	model, err := scripted.Start("127.0.0.1:0", sc, scripted.Options{})
	require.NoError(t, err)
	ts := testServer{taskQueue: "starter-" + newJobID(), address: address, namespace: namespace}
	ts.srv, err = server.New(ctx, server.Config{
		TemporalAddress: address, Namespace: namespace, TaskQueue: ts.taskQueue,
		DatabaseURL: devtest.Database(t), HTTPAddr: "off",
		Roles: []string{server.RoleWorker, server.RoleGateway}, GRPCAddr: "127.0.0.1:0",
		Tokens: map[string]string{"tok": "demo"},
		Model:  llm.Config{OpenAIBaseURL: model.URL(), OpenAIAPIKey: "test"},
	}, zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)))
	require.NoError(t, err)
	cat, err := registry.Parse(ts.srv.Tools(), "c.yaml", []byte("tenant: demo\ndefault_agent: a\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n"))
	require.NoError(t, err)
	_, err = ts.srv.Store().ApplyCatalog(ctx, cat, false)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- ts.srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		ts.srv.Close()
		_ = model.Close()
	})
	return ts
}

func TestChatResumesAfterDroppedConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := startServer(t, "pacing: {chunk_words: 1, delay_ms: 40}\nrules:\n  - reply: {text: '"+chatStory+"'}\n").srv

	p := newProxy(t, srv.GRPCAddr())
	out := &cutWriter{marker: "four", cut: p.cut}
	err := run(ctx, []string{"chat", "--addr", p.ln.Addr().String(), "--token", "tok", "tell me a story"}, out)
	require.NoError(t, err)
	got := out.buf.String()
	require.True(t, out.done, "the connection was cut")
	require.Contains(t, got, chatStory, "the story arrives whole, once")
	require.Equal(t, 1, strings.Count(got, "twenty"))
	require.Contains(t, got, "tokens]")
}

func TestChatInASession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := startServer(t, "rules:\n  - when: {user: '^(.+)$'}\n    reply: {text: 'echo: $1'}\n").srv

	session := "s-" + newJobID()
	for i, prompt := range []string{"first", "second"} {
		var out bytes.Buffer
		require.NoError(t, run(ctx, []string{"chat", "--addr", srv.GRPCAddr(), "--token", "tok", "--session", session, prompt}, &out))
		require.Contains(t, out.String(), "echo: "+prompt)
		require.Contains(t, out.String(), fmt.Sprintf("turn/demo/%s-%d", session, i+1))
	}
	msgs, err := srv.Store().SessionMessages(ctx, "demo", session, 0)
	require.NoError(t, err)
	require.Len(t, msgs, 4, "both messages and answers are in the session's transcript")
}
