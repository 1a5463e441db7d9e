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

	"github.com/agentflow/agentflow/internal/testserver"
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
			p.mu.Lock()
			target := p.backend
			p.mu.Unlock()
			b, err := net.Dial("tcp", target)
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

// startServer runs a worker and gateway on the test stack with a scripted
// model and a one-agent catalog for tenant demo; token "tok" is demo's.
func startServer(t *testing.T, modelScript string) *testserver.Server {
	t.Helper()
	return testserver.Start(t, testserver.Options{
		Script:   modelScript,
		Catalogs: []string{"tenant: demo\ndefault_agent: a\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n"},
		Tokens:   map[string]string{"tok": "demo"},
		Logger:   zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})
}

func TestChatResumesAfterDroppedConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := startServer(t, "pacing: {chunk_words: 1, delay_ms: 40}\nrules:\n  - reply: {text: '"+chatStory+"'}\n")

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
	srv := startServer(t, "rules:\n  - when: {user: '^(.+)$'}\n    reply: {text: 'echo: $1'}\n")

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
