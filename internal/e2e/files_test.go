package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/flights"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// TestFiles: on the whole process, a file uploaded over the HTTP API
// reads back by its ref, with the type its tenant gave, whatever
// another tenant's upload of the same bytes said; the data a turn's tool kept for the tenant is
// downloadable by the ref the turn's result names, by that tenant only;
// and the default upload limit (20 MiB) refuses a larger file before its
// bytes are sent (Expect: 100-continue), storing nothing.
func TestFiles(t *testing.T) {
	key := "flights-key-" + testserver.RandomID() + testserver.RandomID()
	t.Setenv("TEST_FLIGHTS_KEY", key)
	flightsAPI := startFlights(t, key)
	logger, _ := keptLog(t, zapcore.WarnLevel)
	demo, other := "secret-"+testserver.RandomID(), "secret-"+testserver.RandomID()
	srv := testserver.Start(t, testserver.Options{
		Script:   strings.ReplaceAll(dataScript, "API", flightsAPI.URL),
		Catalogs: []string{strings.ReplaceAll(dataCatalog, "API", strings.TrimPrefix(flightsAPI.URL, "http://"))},
		Logger:   logger, HTTPAPI: true,
		Tokens: map[string]string{demo: "demo:user:dee", other: "other:user:oto"},
	})
	api := "http://" + srv.HTTPAPIAddr()
	send := func(method, path, token string, header map[string]string, body io.Reader) (*http.Response, []byte) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, api+path, body)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, data
	}

	t.Run("upload and download", func(t *testing.T) {
		png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
		resp, data := send("POST", "/v1/files?name=cat.png", demo, nil, bytes.NewReader(png))
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", data)
		var info gateway.FileInfo
		require.NoError(t, json.Unmarshal(data, &info))
		require.True(t, strings.HasPrefix(info.Ref, agent.CASRefPrefix), info.Ref)
		require.Equal(t, gateway.FileInfo{Ref: info.Ref, MIMEType: "image/png", Size: int64(len(png)), Name: "cat.png"}, info)

		resp, data = send("GET", resp.Header.Get("Location"), demo, nil, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
		require.Equal(t, png, data)
		require.Equal(t, "image/png", resp.Header.Get("Content-Type"))
		resp, _ = send("GET", "/v1/files/"+url.PathEscape(info.Ref), other, nil, nil)
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
	})

	t.Run("bytes another tenant stored", func(t *testing.T) {
		// Another tenant stores a page first, calling it an image; this
		// tenant's upload of the same bytes is answered and served with
		// its own type, as if it were the first.
		page := []byte("<!doctype html><p>hello " + testserver.RandomID() + "</p>")
		resp, data := send("POST", "/v1/files", other, map[string]string{"Content-Type": "image/png"}, bytes.NewReader(page))
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", data)
		resp, data = send("POST", "/v1/files", demo, map[string]string{"Content-Type": "text/html"}, bytes.NewReader(page))
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", data)
		var info gateway.FileInfo
		require.NoError(t, json.Unmarshal(data, &info))
		require.Equal(t, "text/html", info.MIMEType)
		resp, data = send("GET", resp.Header.Get("Location"), demo, nil, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
		require.Equal(t, "text/html", resp.Header.Get("Content-Type"))
		resp, _ = send("GET", "/v1/files/"+url.PathEscape(info.Ref), other, nil, nil)
		require.Equal(t, "image/png", resp.Header.Get("Content-Type"))
	})

	t.Run("a tool's data", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", JobID: "files-" + testserver.RandomID(),
			Prompt: "fetch flights from NYC to LAX, sort by price, show top 2"}
		run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, req)
		require.NoError(t, err)
		res, err := turnclient.Result(ctx, run)
		require.NoError(t, err)
		require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
		require.True(t, strings.HasPrefix(res.DataRef, agent.CASRefPrefix), res.DataRef)

		resp, data := send("GET", "/v1/files/"+url.PathEscape(res.DataRef), demo, nil, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		require.Equal(t, "attachment", resp.Header.Get("Content-Disposition"))
		var rows []flights.Flight
		require.NoError(t, json.Unmarshal(data, &rows))
		require.Equal(t, cheapest("NYC", "LAX")[:2], rows)

		resp, data = send("GET", "/v1/files/"+url.PathEscape(res.DataRef), other, nil, nil)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", data)
	})

	t.Run("the default limit", func(t *testing.T) {
		var before, after int
		count := `SELECT count(*) FROM cas_blobs`
		require.NoError(t, srv.Store().Pool().QueryRow(context.Background(), count).Scan(&before))
		big := bytes.Repeat([]byte("z"), gateway.DefaultMaxUploadBytes+1)
		resp, data := send("POST", "/v1/files", demo, map[string]string{"Expect": "100-continue"}, bytes.NewReader(big))
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%s", data)
		var p gateway.Problem
		require.NoError(t, json.Unmarshal(data, &p))
		require.Contains(t, p.Detail, "larger than 20971520 bytes")
		require.NoError(t, srv.Store().Pool().QueryRow(context.Background(), count).Scan(&after))
		require.Equal(t, before, after, "nothing stored")

		// The limit itself is taken.
		resp, data = send("POST", "/v1/files", demo, nil, bytes.NewReader(big[1:]))
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", data)
	})
}
