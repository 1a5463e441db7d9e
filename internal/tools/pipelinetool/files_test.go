package pipelinetool_test

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
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/store"

	"github.com/agentflow/agentflow/internal/tools"
	. "github.com/agentflow/agentflow/internal/tools/kind"
	. "github.com/agentflow/agentflow/internal/tools/pipelinetool"
)

// storeCall is a Call whose blobs are the tenant's in a real store, as
// the worker's are.
func storeCall(s *store.Store, tenant string, client *http.Client, args string) Call {
	return Call{Args: json.RawMessage(args), TenantID: tenant, HTTP: client,
		OpenBlob: func(ctx context.Context, ref string) (Blob, error) {
			b, err := s.OpenTenantBlob(ctx, tenant, ref)
			if err != nil {
				return nil, err
			}
			return b, nil
		},
		WriteBlob: func(ctx context.Context, r io.Reader, contentType string) (agent.BlobInfo, error) {
			return s.WriteTenantBlob(ctx, tenant, r, contentType, MaxBlobBytes)
		},
		Data: func(ctx context.Context, ref string) ([]byte, error) { return s.Data(ctx, tenant, ref) },
	}
}

// TestPipelineFiles: http_request keeps a response as a file of the
// tenant's, stored as it arrives (past the egress cap for bodies held in
// memory), and hands it to the turn; a POST with body_ref sends a stored
// file as it is read; a download cut short stores nothing, and its retry
// stores the file.
func TestPipelineFiles(t *testing.T) {
	s, err := store.Open(t.Context(), devtest.Database(t), store.Options{BlobChunkSize: 64 << 10})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	file := make([]byte, 3<<20+17)
	_, _ = rand.NewChaCha8([32]byte{9}).Read(file)
	sum := sha256.Sum256(file)
	ref := agent.CASRefPrefix + hex.EncodeToString(sum[:])

	var cut atomic.Bool
	var upload struct {
		contentType string
		length      int64
		sum         string
		query       string
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/scan.pdf":
			w.Header().Set("Content-Type", "application/pdf")
			w.Header().Set("Content-Length", strconv.Itoa(len(file)))
			if cut.Load() {
				_, _ = w.Write(file[:1<<20])
				panic(http.ErrAbortHandler) // the connection drops midway
			}
			_, _ = w.Write(file)
		case "/ocr":
			h := sha256.New()
			n, _ := io.Copy(h, r.Body)
			upload.contentType, upload.length, upload.sum, upload.query = r.Header.Get("Content-Type"), r.ContentLength, hex.EncodeToString(h.Sum(nil)), r.URL.RawQuery
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"bytes": %d, "pages": 3}`, n)
		}
	}))
	t.Cleanup(api.Close)
	policy, err := egress.ParsePolicy([]string{strings.TrimPrefix(api.URL, "http://")})
	require.NoError(t, err)
	policy.MaxResponseBytes = 1 << 20 // less than the file: a download streams past it
	client := loopbackOpen(t).Client(policy)
	r, err := tools.NewRegistry(Deps{}, ExecutePipeline())
	require.NoError(t, err)
	spec := agent.Tool{Name: "execute_pipeline", Kind: "execute_pipeline", Config: json.RawMessage(`{"cache_ttl_sec":0}`)}
	download := `{"session_id":"s","pipeline":[{"step":"http_request","url":"` + api.URL + `/scan.pdf","response_as":"file"}]}`

	cut.Store(true)
	_, err = r.Execute(t.Context(), spec, storeCall(s, "demo", client, download))
	require.Error(t, err)
	require.False(t, agent.IsCode(err, agent.CodeInvalid), "a download cut short is worth a retry: %v", err)
	_, err = s.TenantBlobInfo(t.Context(), "demo", ref)
	require.True(t, agent.IsCode(err, agent.CodeNotFound), "nothing of it is stored: %v", err)

	cut.Store(false)
	out, err := r.Execute(t.Context(), spec, storeCall(s, "demo", client, download))
	require.NoError(t, err)
	require.Equal(t, []File{{Name: "scan.pdf", MIMEType: "application/pdf", Ref: ref}}, out.Files)
	require.JSONEq(t, `{"ref":"`+ref+`","content_type":"application/pdf","size":`+strconv.Itoa(len(file))+`,"name":"scan.pdf"}`, string(out.Data))
	got, _, err := s.TenantBlob(t.Context(), "demo", ref)
	require.NoError(t, err)
	require.True(t, bytes.Equal(file, got))
	_, err = s.TenantBlobInfo(t.Context(), "acme", ref)
	require.True(t, agent.IsCode(err, agent.CodeNotFound), "another tenant cannot read it: %v", err)

	send := `{"session_id":"s","pipeline":[{"step":"http_request","url":"` + api.URL + `/ocr","method":"POST","body_ref":"` + ref + `","params":{"lang":"en"}}]}`
	out, err = r.Execute(t.Context(), spec, storeCall(s, "demo", client, send))
	require.NoError(t, err)
	require.JSONEq(t, fmt.Sprintf(`{"bytes": %d, "pages": 3}`, len(file)), string(out.Data))
	require.Equal(t, "application/pdf", upload.contentType)
	require.EqualValues(t, len(file), upload.length, "sent with its length")
	require.Equal(t, hex.EncodeToString(sum[:]), upload.sum)
	require.Equal(t, "lang=en", upload.query)

	// Another tenant cannot send it.
	_, err = r.Execute(t.Context(), spec, storeCall(s, "acme", client, send))
	require.True(t, agent.IsCode(err, agent.CodeNotFound), "%v", err)
}

func TestFileName(t *testing.T) {
	for _, tc := range []struct{ disposition, path, want string }{
		{`attachment; filename="report.pdf"`, "/files/x", "report.pdf"},
		{`attachment; filename*=UTF-8''%E2%82%AC%20rates.csv`, "/x", "€ rates.csv"},
		{`attachment; filename="../../etc/passwd"`, "/x", "passwd"},
		{`attachment; filename="C:\\temp\\a.txt"`, "/x", "a.txt"},
		{"", "/files/scan.pdf", "scan.pdf"},
		{"", "/", ""},
		{"", "", ""},
		{`attachment; filename="a` + "\x07" + `b"`, "/x", ""},
		{`attachment; filename="` + strings.Repeat("n", 256) + `"`, "/x", ""},
		{"not a disposition;;", "/files/fallback.bin", "fallback.bin"},
	} {
		require.Equal(t, tc.want, FileName(tc.disposition, tc.path), "%q %q", tc.disposition, tc.path)
	}
}

// FuzzFileName: whatever header and path a server sends, a downloaded
// file's name is none or a short, printable last path element.
func FuzzFileName(f *testing.F) {
	f.Add(`attachment; filename="report.pdf"`, "/files/x")
	f.Add(`attachment; filename*=UTF-8''%E2%82%AC.txt`, "/")
	f.Add("inline", "/a/b/c.bin")
	f.Add(`attachment; filename="..\\x"`, "")
	f.Fuzz(func(t *testing.T, disposition, urlPath string) {
		name := FileName(disposition, urlPath)
		if name == "" {
			return
		}
		require.LessOrEqual(t, len(name), MaxFileName)
		require.True(t, utf8.ValidString(name))
		require.False(t, strings.ContainsAny(name, `/\`), "%q", name)
		require.False(t, strings.ContainsFunc(name, unicode.IsControl), "%q", name)
		require.NotContains(t, []string{".", ".."}, name)
	})
}
