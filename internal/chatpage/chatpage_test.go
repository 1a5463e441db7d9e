package chatpage

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestServe(t *testing.T) {
	mux := http.NewServeMux()
	Register(mux, Options{})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	get := func(path string, header map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		require.NoError(t, err)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(body)
	}

	for _, tc := range []struct {
		path, contentType, holds string
	}{
		{Path, "text/html; charset=utf-8", "<title>agentflow chat</title>"},
		{Path + "/chat.js", "text/javascript; charset=utf-8", `"use strict";`},
		{Path + "/chat.css", "text/css; charset=utf-8", ".turn {"},
		{EvalsPath, "text/html; charset=utf-8", "<title>agentflow evaluation</title>"},
		{Path + "/evals.js", "text/javascript; charset=utf-8", `"/v1/evals/"`},
		{Path + "/evals.css", "text/css; charset=utf-8", "#eval-id"},
		{Path + "/diff.js", "text/javascript; charset=utf-8", "agentflowDiff"},
		{Path + "/page.js", "text/javascript; charset=utf-8", `"agentflow.token"`},
		{TurnPath + "t1/job-7", "text/html; charset=utf-8", "<title>agentflow turn</title>"},
		{TurnPath + "t1/chat-1%2F2", "text/html; charset=utf-8", `id="timeline"`},
		{Path + "/turn.js", "text/javascript; charset=utf-8", "/timeline/steps/"},
		{Path + "/turn.css", "text/css; charset=utf-8", ".bar"},
		{TurnsPath, "text/html; charset=utf-8", "<title>agentflow turns</title>"},
		{Path + "/turns.js", "text/javascript; charset=utf-8", `"/v1/turns"`},
		{ConversationsPath + "s-1", "text/html; charset=utf-8", "<title>agentflow conversation</title>"},
		{Path + "/conversation.js", "text/javascript; charset=utf-8", "/transcript"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, body := get(tc.path, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, tc.contentType, resp.Header.Get("Content-Type"))
			require.Equal(t, ContentSecurityPolicy, resp.Header.Get("Content-Security-Policy"))
			require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
			require.Contains(t, body, tc.holds)

			// Revalidation: the same file is not sent again.
			etag := resp.Header.Get("ETag")
			require.NotEmpty(t, etag)
			again, body := get(tc.path, map[string]string{"If-None-Match": etag})
			require.Equal(t, http.StatusNotModified, again.StatusCode)
			require.Empty(t, body)
		})
	}

	// Each page loads only its own files (scripts and style sheets), each
	// of which is served; its links lead to the other pages.
	loads := regexp.MustCompile(`<(?:script|link)\b[^>]*\b(?:src|href)="([^"]+)"`)
	for _, p := range []struct {
		path string
		want []string
	}{
		{Path, []string{"chat.css", "chat.js"}},
		{EvalsPath, []string{"chat.css", "evals.css", "diff.js", "evals.js"}},
		{TurnPath + "t1/job-7", []string{"chat.css", "turn.css", "page.js", "diff.js", "turn.js"}},
		{TurnsPath, []string{"chat.css", "turn.css", "page.js", "turns.js"}},
		{ConversationsPath + "s-1", []string{"chat.css", "turn.css", "page.js", "conversation.js"}},
	} {
		_, page := get(p.path, nil)
		var got []string
		for _, ref := range loads.FindAllStringSubmatch(page, -1) {
			name, ok := strings.CutPrefix(ref[1], Path+"/")
			require.True(t, ok, "%s loads %s, not a file of its own", p.path, ref[1])
			resp, _ := get(ref[1], nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, ref[1])
			got = append(got, name)
		}
		require.Equal(t, p.want, got, "what %s loads, in order", p.path)
	}
	_, page := get(Path, nil)
	require.Contains(t, page, `href="`+TurnsPath+`"`, "the chat page links the list of turns")

	// Without a dev token the page is offered none, and nothing but the
	// pages and their files is served.
	for _, path := range []string{Path + "/index.html", Path + "/nope.js", Path + "/static", Path + "/evals.html", EvalsPath + "/x", DevPath,
		Path + "/turn.html", Path + "/page.go", TurnPath + "t1", TurnPath + "t1/job-7/x", TurnsPath + "/x", ConversationsPath, ConversationsPath + "s-1/x"} {
		resp, _ := get(path, nil)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}
	// Only GET (and HEAD) reach the page.
	resp, err := http.Post(srv.URL+Path, "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// TestDevToken: with the operator's dev token, DevPath serves it and its
// tenant, never to be cached; without it, DevPath is not found (TestServe)
// and the page itself is the same file either way.
func TestDevToken(t *testing.T) {
	serve := func(o Options) *httptest.Server {
		mux := http.NewServeMux()
		Register(mux, o)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return srv
	}
	page := func(srv *httptest.Server, path string) (*http.Response, []byte) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, body
	}
	dev := serve(Options{DevToken: "local-6f1c", DevTenant: "demo"})
	plain := serve(Options{})

	resp, body := page(dev, DevPath)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	require.Equal(t, ContentSecurityPolicy, resp.Header.Get("Content-Security-Policy"))
	require.JSONEq(t, `{"token": "local-6f1c", "tenant": "demo"}`, string(body))

	resp, _ = page(plain, DevPath)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "no dev token: nothing offered")

	for _, path := range []string{Path, Path + "/chat.js"} {
		_, withDev := page(dev, path)
		_, without := page(plain, path)
		require.Equal(t, without, withDev, "%s is the same file", path)
		require.NotContains(t, string(withDev), "local-6f1c", "the token is only at %s", DevPath)
	}
}
