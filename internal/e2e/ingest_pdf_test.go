package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/go-pdf/fpdf"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
)

// upload stores data through /v1/files with its content type and
// answers its ref.
func (k knowledgeClient) upload(token, contentType string, data []byte) string {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, k.api+"/v1/files", bytes.NewReader(data))
	require.NoError(k.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(k.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(k.t, err)
	require.Equal(k.t, http.StatusCreated, resp.StatusCode, "%s", body)
	var info struct {
		Ref string `json:"ref"`
	}
	require.NoError(k.t, json.Unmarshal(body, &info))
	return info.Ref
}

// TestIngestPDF: a PDF uploaded to /v1/files and ingested by ref is read
// page by page and found by a sentence of its second page; a PDF that
// does not parse fails alone, named, and nothing of it is stored; a PDF
// given inline is refused before anything is stored.
func TestIngestPDF(t *testing.T) {
	admin := "secret-" + testserver.RandomID()
	srv := testserver.Start(t, testserver.Options{Script: ingestScript, HTTPAPI: true,
		Tokens: map[string]string{admin: "acme:admin+user:ann"}})
	k := knowledgeClient{t: t, api: "http://" + srv.HTTPAPIAddr()}
	code, data := k.do("POST", "/v1/collections", admin, map[string]any{"name": "manuals", "embedding_model": "openai:text-embedding-3-small"})
	require.Equal(t, http.StatusCreated, code, "%s", data)

	pdf := fpdf.New("P", "mm", "A4", "")
	pdf.SetFont("Helvetica", "", 12)
	for _, text := range []string{"The pump is primed by opening valve seven.", "Replace the quartz filter every ninety days."} {
		pdf.AddPage()
		pdf.MultiCell(0, 6, text, "", "L", false)
	}
	var b bytes.Buffer
	require.NoError(t, pdf.Output(&b))
	manual := k.upload(admin, "application/pdf", b.Bytes())
	broken := k.upload(admin, "application/pdf", b.Bytes()[:b.Len()/2])

	st := k.ingest(admin, "manuals", map[string]any{"documents": []map[string]any{
		{"title": "pump manual", "ref": manual}, {"title": "torn manual", "ref": broken}}})
	require.Equal(t, contract.IngestCompleted, st.State, "%+v", st)
	require.Equal(t, 1, st.Stored)
	require.Equal(t, 1, st.Failed)
	require.Len(t, st.Errors, 1)
	require.Equal(t, "torn manual", st.Errors[0].Title)
	require.Contains(t, st.Errors[0].Message, "the PDF does not parse")

	hits := k.search(admin, "manuals", "quartz filter", "text", 3)
	require.NotEmpty(t, hits)
	require.Equal(t, "pump manual", hits[0].DocumentTitle)
	require.Contains(t, hits[0].Chunk.Text, "Replace the quartz filter every ninety days.")
	require.Contains(t, hits[0].Chunk.Text, "The pump is primed by opening valve seven.\n\nReplace", "pages in order, a blank line between")

	code, data = k.do("POST", "/v1/collections/manuals/documents", admin, map[string]any{"documents": []map[string]any{
		{"title": "inline", "content_type": "application/pdf", "text": b.String()}}})
	require.Equal(t, http.StatusBadRequest, code, "%s", data)
	require.Contains(t, string(data), "upload the PDF to /v1/files")
	require.Len(t, k.documents(admin, "manuals"), 1)
}
