package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// TestObjectStoreFiles runs large data through a server whose blobs over
// a MiB are kept on the stack's object store: a file uploaded through
// /v1/files and downloaded, whole and by range, and a tool's 50 MiB
// download kept as a file and sent on by ref in the same turn. Each is
// an object, and its row names it and holds no bytes.
func TestObjectStoreFiles(t *testing.T) {
	files := startFileServer(t)
	const demo, other = "objstore-demo-token", "objstore-other-token"
	srv := testserver.Start(t, testserver.Options{
		Script:   strings.ReplaceAll(binaryScript, "FILES", files.URL),
		Catalogs: []string{strings.ReplaceAll(binaryCatalog, "FILESHOST", strings.TrimPrefix(files.URL, "http://"))},
		HTTPAPI:  true, Tokens: map[string]string{demo: "demo:user:dee", other: "other:user:oto"},
		ObjectStore: true,
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
	inObjectStore := func(ref string) {
		t.Helper()
		sum := strings.TrimPrefix(ref, agent.CASRefPrefix)
		var key string
		require.NoError(t, srv.Store().Pool().QueryRow(t.Context(),
			`SELECT object_key FROM cas_blobs WHERE sha256 = $1 AND data IS NULL AND content_id IS NULL`, sum).Scan(&key))
		require.Equal(t, objstore.Key(sum), key)
	}

	data := make([]byte, 3<<20)
	_, _ = rand.NewChaCha8([32]byte{46}).Read(data)
	resp, body := send("POST", "/v1/files?name=big.bin", demo, nil, bytes.NewReader(data))
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	var info gateway.FileInfo
	require.NoError(t, json.Unmarshal(body, &info))
	require.Equal(t, gateway.FileInfo{Ref: info.Ref, MIMEType: "application/octet-stream", Size: int64(len(data)), Name: "big.bin"}, info)
	inObjectStore(info.Ref)

	resp, body = send("GET", resp.Header.Get("Location"), demo, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Equal(t, data, body)
	resp, body = send("GET", "/v1/files/"+url.PathEscape(info.Ref), demo, map[string]string{"Range": "bytes=2000000-2000999"}, nil)
	require.Equal(t, http.StatusPartialContent, resp.StatusCode, "%s", body)
	require.Equal(t, data[2000000:2001000], body)
	resp, _ = send("GET", "/v1/files/"+url.PathEscape(info.Ref), other, nil, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	// A turn: the tool keeps its download as a file, and its next call
	// reads it back from the object store to send it on.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	turn, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo",
		JobID: "objstore-" + testserver.RandomID(), Prompt: "download archive.bin and send it on"})
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, turn)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	h := sha256Hex(t, "archive.bin")
	require.Equal(t, fmt.Sprintf("Sent %d bytes; the other side has sha256 %s.", fileSize, h), res.Output)
	inObjectStore(agent.CASRefPrefix + h)
	var chunks int
	require.NoError(t, srv.Store().Pool().QueryRow(ctx, `SELECT count(*) FROM blob_chunks`).Scan(&chunks))
	require.Zero(t, chunks, "no blob is kept in PostgreSQL's chunks")
}

// sha256Hex is the sha256 of the file server's generated file name.
func sha256Hex(t *testing.T, name string) string {
	t.Helper()
	h := sha256.New()
	require.NoError(t, generated(h, name, fileSize))
	return hex.EncodeToString(h.Sum(nil))
}
