package gateway_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/store"
)

// uploadLimit is the files fixture's AGENTFLOW_MAX_UPLOAD_BYTES.
const uploadLimit = 1024

// filesFixture is a gateway's HTTP API on a database of its own, with a
// user of tenant demo, one of tenant other, and an admin of demo who may
// not start turns.
type filesFixture struct {
	url   string
	store *store.Store
}

func startFiles(t *testing.T) filesFixture {
	t.Helper()
	logger := zaptest.NewLogger(t)
	st, err := store.Open(t.Context(), devtest.Database(t), store.Options{Logger: logger})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	var tokens []gateway.Token
	for _, tk := range []struct {
		secret, tenant string
		role           gateway.Role
	}{{"tok-demo", "demo", gateway.RoleUser}, {"tok-other", "other", gateway.RoleUser}, {"tok-admin", "demo", gateway.RoleAdmin}} {
		tok, err := gateway.NewToken(tk.secret, tk.tenant, tk.secret, tk.role)
		require.NoError(t, err)
		tokens = append(tokens, tok)
	}
	svc, err := gateway.New(gateway.Options{Store: st, Tokens: tokens, Logger: logger})
	require.NoError(t, err)
	api, err := gateway.NewHTTPAPI(svc, nil, gateway.HTTPOptions{MaxUploadBytes: uploadLimit})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- api.Serve() }()
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		srv.Close()
		api.Stop(0)
		require.NoError(t, <-done)
	})
	return filesFixture{url: srv.URL, store: st}
}

// upload is a request to POST /v1/files.
type upload struct {
	token   string
	query   string
	header  map[string]string
	body    []byte
	chunked bool // no Content-Length: the body's length is learnt by reading it
}

// multipartBody is a form of parts, each {name, filename, content type, bytes}.
func multipartBody(t *testing.T, parts ...[4]string) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		disposition := `form-data; name="` + p[0] + `"`
		if p[1] != "" {
			disposition += `; filename="` + p[1] + `"`
		}
		h.Set("Content-Disposition", disposition)
		if p[2] != "" {
			h.Set("Content-Type", p[2])
		}
		w, err := mw.CreatePart(h)
		require.NoError(t, err)
		_, err = w.Write([]byte(p[3]))
		require.NoError(t, err)
	}
	require.NoError(t, mw.Close())
	return mw.FormDataContentType(), buf.Bytes()
}

func (f filesFixture) post(t *testing.T, u upload) *http.Response {
	t.Helper()
	var body io.Reader = bytes.NewReader(u.body)
	if u.chunked {
		body = io.MultiReader(body) // hides the length from the client
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.url+"/v1/files"+u.query, body)
	require.NoError(t, err)
	if u.token != "" {
		req.Header.Set("Authorization", "Bearer "+u.token)
	}
	for k, v := range u.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func (f filesFixture) get(t *testing.T, token, path string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.url+path, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
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

// stored uploads u, which must succeed, and returns its answer.
func (f filesFixture) stored(t *testing.T, u upload) gateway.FileInfo {
	t.Helper()
	resp := f.post(t, u)
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", data)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var info gateway.FileInfo
	require.NoError(t, json.Unmarshal(data, &info))
	require.Equal(t, "/v1/files/"+url.PathEscape(info.Ref), resp.Header.Get("Location"))
	return info
}

func casRef(data []byte) string {
	sum := sha256.Sum256(data)
	return agent.CASRefPrefix + hex.EncodeToString(sum[:])
}

func filePath(ref string) string { return "/v1/files/" + url.PathEscape(ref) }

// requireProblem asserts an answer is the API's problem of a type and status.
func requireProblem(t *testing.T, resp *http.Response, body []byte, status int, title, detail string) {
	t.Helper()
	require.Equal(t, status, resp.StatusCode, "%s", body)
	require.Equal(t, gateway.ProblemContentType, resp.Header.Get("Content-Type"))
	var p gateway.Problem
	require.NoError(t, json.Unmarshal(body, &p), "%s", body)
	require.Equal(t, title, p.Title)
	require.Equal(t, status, p.Status)
	require.Contains(t, p.Detail, detail)
}

var (
	pngBytes  = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	gifBytes  = []byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;")
	htmlBytes = []byte("<!doctype html><script>alert(document.cookie)</script>")
)

// TestFileUpload: a file sent as the body or as a multipart part is
// stored for the caller's tenant under the sha256 of its bytes, with
// its type (sniffed when it has none) and its name echoed, and reads
// back as it was sent; the same bytes again are the same ref.
func TestFileUpload(t *testing.T) {
	t.Parallel()
	f := startFiles(t)
	formPNG, formPNGBody := multipartBody(t, [4]string{"file", "dir/cat.png", "image/png", string(pngBytes)})
	formGIF, formGIFBody := multipartBody(t, [4]string{"file", "anim.gif", "application/octet-stream", string(gifBytes)})
	formText, formTextBody := multipartBody(t, [4]string{"file", "", "", "notes, plain"})
	for _, tc := range []struct {
		name     string
		up       upload
		data     []byte
		wantType string
		wantName string
	}{
		{"raw with its type and ?name=", upload{query: "?name=cat.png", header: map[string]string{"Content-Type": "image/png"}, body: pngBytes},
			pngBytes, "image/png", "cat.png"},
		{"raw named by Content-Disposition", upload{header: map[string]string{"Content-Type": "text/html; charset=UTF-8", "Content-Disposition": `attachment; filename="page.html"`}, body: htmlBytes},
			htmlBytes, "text/html; charset=UTF-8", "page.html"},
		{"raw without a type is sniffed", upload{body: gifBytes}, gifBytes, "image/gif", ""},
		{"raw octet-stream is sniffed", upload{header: map[string]string{"Content-Type": "application/octet-stream"}, body: []byte("just text")},
			[]byte("just text"), "text/plain; charset=utf-8", ""},
		{"raw of unknown length", upload{chunked: true, query: "?name=" + url.QueryEscape("a b.txt"), header: map[string]string{"Content-Type": "text/plain"}, body: []byte("chunked")},
			[]byte("chunked"), "text/plain", "a b.txt"},
		{"multipart", upload{header: map[string]string{"Content-Type": formPNG}, body: formPNGBody}, pngBytes, "image/png", "cat.png"},
		{"multipart octet-stream is sniffed", upload{header: map[string]string{"Content-Type": formGIF}, body: formGIFBody}, gifBytes, "image/gif", "anim.gif"},
		{"multipart without a type or name", upload{header: map[string]string{"Content-Type": formText}, body: formTextBody},
			[]byte("notes, plain"), "text/plain; charset=utf-8", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.up.token = "tok-demo"
			info := f.stored(t, tc.up)
			// The PNG is uploaded twice over (raw, then multipart): the
			// same bytes are the same ref.
			require.Equal(t, gateway.FileInfo{Ref: casRef(tc.data), MIMEType: tc.wantType, Size: int64(len(tc.data)), Name: tc.wantName}, info)

			resp, data := f.get(t, "tok-demo", filePath(info.Ref), nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
			require.Equal(t, tc.data, data)
			require.Equal(t, tc.wantType, resp.Header.Get("Content-Type"))
		})
	}

	t.Run("idempotent", func(t *testing.T) {
		up := upload{token: "tok-demo", header: map[string]string{"Content-Type": "image/png"}, body: pngBytes}
		first := f.stored(t, up)
		up.query = "?name=other.png"
		again := f.stored(t, up)
		require.Equal(t, first.Ref, again.Ref)
		require.Equal(t, "other.png", again.Name, "the name is echoed, not stored")
		// Bytes stored before keep the type they came with first.
		up.header["Content-Type"] = "image/x-png"
		require.Equal(t, "image/png", f.stored(t, up).MIMEType)
		var owners int
		require.NoError(t, f.store.Pool().QueryRow(t.Context(),
			`SELECT count(*) FROM blob_owners WHERE tenant_id = 'demo' AND sha256 = $1`, strings.TrimPrefix(first.Ref, agent.CASRefPrefix)).Scan(&owners))
		require.Equal(t, 1, owners)
	})

	t.Run("ref forms", func(t *testing.T) {
		digest := strings.TrimPrefix(casRef(pngBytes), agent.CASRefPrefix)
		for _, path := range []string{
			filePath(casRef(pngBytes)),                       // cas:%2F%2Fsha256:<hex>
			"/v1/files/" + url.QueryEscape(casRef(pngBytes)), // cas%3A%2F%2Fsha256%3A<hex>
			"/v1/files/sha256:" + digest,
			"/v1/files/sha256:" + strings.ToUpper(digest),
		} {
			resp, data := f.get(t, "tok-demo", path, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, data)
			require.Equal(t, pngBytes, data, path)
		}
	})
}

// TestFileUploadRefused: what is not one file of 1 to the limit's bytes,
// sent by a token that may start turns, is refused with what is wrong,
// and nothing is stored.
func TestFileUploadRefused(t *testing.T) {
	t.Parallel()
	f := startFiles(t)
	over := bytes.Repeat([]byte("x"), uploadLimit+1)
	atLimit := bytes.Repeat([]byte("y"), uploadLimit)
	overForm := [4]string{"file", "big.bin", "", string(over)}
	emptyForm := [4]string{"file", "e.txt", "text/plain", ""}
	noFile := [4]string{"title", "", "", "a title"}
	one := [4]string{"file", "a.txt", "", "a"}
	// multipartBody draws a new boundary each call: a form's header and
	// body come from the same call.
	formOf := func(parts ...[4]string) (map[string]string, []byte) {
		ctype, body := multipartBody(t, parts...)
		return map[string]string{"Content-Type": ctype}, body
	}
	overH, overB := formOf(overForm)
	emptyH, emptyB := formOf(emptyForm)
	noFileH, noFileB := formOf(noFile)
	twoH, twoB := formOf(one, one)

	var before int
	count := `SELECT count(*) FROM cas_blobs`
	require.NoError(t, f.store.Pool().QueryRow(t.Context(), count).Scan(&before))

	for _, tc := range []struct {
		name   string
		up     upload
		status int
		title  string
		detail string
	}{
		{"over the limit", upload{token: "tok-demo", body: over}, http.StatusRequestEntityTooLarge, agent.ErrTypeInvalidRequest, "larger than 1024 bytes"},
		{"over the limit, length unknown", upload{token: "tok-demo", body: over, chunked: true}, http.StatusRequestEntityTooLarge, agent.ErrTypeInvalidRequest, "AGENTFLOW_MAX_UPLOAD_BYTES"},
		{"over the limit, multipart", upload{token: "tok-demo", header: overH, body: overB}, http.StatusRequestEntityTooLarge, agent.ErrTypeInvalidRequest, "larger than 1024 bytes"},
		{"empty", upload{token: "tok-demo", header: map[string]string{"Content-Type": "text/plain"}}, http.StatusBadRequest, agent.ErrTypeInvalidRequest, "the file is empty"},
		{"empty part", upload{token: "tok-demo", header: emptyH, body: emptyB}, http.StatusBadRequest, agent.ErrTypeInvalidRequest, "the file is empty"},
		{"no file part", upload{token: "tok-demo", header: noFileH, body: noFileB}, http.StatusBadRequest, agent.ErrTypeInvalidRequest, `unknown form field "title"`},
		{"two file parts", upload{token: "tok-demo", header: twoH, body: twoB}, http.StatusBadRequest, agent.ErrTypeInvalidRequest, "more than one part"},
		{"multipart without boundary", upload{token: "tok-demo", header: map[string]string{"Content-Type": "multipart/form-data"}, body: []byte("x")}, http.StatusBadRequest, agent.ErrTypeInvalidRequest, "no boundary"},
		{"malformed multipart", upload{token: "tok-demo", header: map[string]string{"Content-Type": "multipart/form-data; boundary=zz"}, body: []byte("--zz\r\nno colon here\r\n\r\nx\r\n--zz--\r\n")}, http.StatusBadRequest, agent.ErrTypeInvalidRequest, "multipart body is malformed"},
		{"a form without parts", upload{token: "tok-demo", header: map[string]string{"Content-Type": "multipart/form-data; boundary=zz"}, body: []byte("not a form")}, http.StatusBadRequest, agent.ErrTypeInvalidRequest, `no part named "file"`},
		{"malformed type", upload{token: "tok-demo", header: map[string]string{"Content-Type": "image/"}, body: []byte("x")}, http.StatusBadRequest, agent.ErrTypeInvalidRequest, "is not a media type"},
		{"encoded", upload{token: "tok-demo", header: map[string]string{"Content-Encoding": "gzip"}, body: []byte("x")}, http.StatusBadRequest, agent.ErrTypeInvalidRequest, "Content-Encoding"},
		{"unknown parameter", upload{token: "tok-demo", query: "?nmae=a", body: []byte("x")}, http.StatusBadRequest, agent.ErrTypeInvalidRequest, `unknown query parameter "nmae"`},
		{"name with a control character", upload{token: "tok-demo", query: "?name=a%0Ab", body: []byte("x")}, http.StatusBadRequest, agent.ErrTypeInvalidRequest, "control characters"},
		{"name too long", upload{token: "tok-demo", query: "?name=" + strings.Repeat("n", 256), body: []byte("x")}, http.StatusBadRequest, agent.ErrTypeInvalidRequest, "at most 255 bytes"},
		{"no token", upload{body: []byte("x")}, http.StatusUnauthorized, agent.ErrTypeUnauthenticated, "missing bearer token"},
		{"unknown token", upload{token: "tok-nobody", body: []byte("x")}, http.StatusUnauthorized, agent.ErrTypeUnauthenticated, "unknown token"},
		{"a token that may not start turns", upload{token: "tok-admin", body: []byte("x")}, http.StatusForbidden, agent.ErrTypePermissionDenied, "needs the role user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := f.post(t, tc.up)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			requireProblem(t, resp, body, tc.status, tc.title, tc.detail)
			if tc.status == http.StatusUnauthorized {
				require.Equal(t, `Bearer realm="agentflow"`, resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
	var after int
	require.NoError(t, f.store.Pool().QueryRow(t.Context(), count).Scan(&after))
	require.Equal(t, before, after, "nothing stored")

	// The limit itself is taken.
	info := f.stored(t, upload{token: "tok-demo", body: atLimit})
	require.Equal(t, int64(uploadLimit), info.Size)
}

// TestFileDownload: a ref is read by its tenant only, served so that no
// browser runs it on the gateway's origin, cached as the immutable
// content it names, and revalidated by its digest.
func TestFileDownload(t *testing.T) {
	t.Parallel()
	f := startFiles(t)
	html := f.stored(t, upload{token: "tok-demo", header: map[string]string{"Content-Type": "text/html"}, body: htmlBytes})
	png := f.stored(t, upload{token: "tok-demo", header: map[string]string{"Content-Type": "image/png"}, body: pngBytes})
	svgBytes := []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>`)
	svg := f.stored(t, upload{token: "tok-demo", header: map[string]string{"Content-Type": "image/svg+xml"}, body: svgBytes})
	// Data the platform kept for the tenant (a tool's output by ref) is
	// the tenant's to download too.
	toolData := []byte(`{"rows":[1,2,3]}`)
	toolRef, err := f.store.PutTenantBlob(t.Context(), "demo", toolData, "application/json")
	require.NoError(t, err)
	// Bytes tenant other stored only for itself.
	otherRef, err := f.store.PutTenantBlob(t.Context(), "other", []byte("other's"), "text/plain")
	require.NoError(t, err)

	t.Run("headers", func(t *testing.T) {
		for _, tc := range []struct {
			name, ref, ctype, disposition string
			data                          []byte
		}{
			{"html is an attachment", html.Ref, "text/html", "attachment", htmlBytes},
			{"svg is an attachment", svg.Ref, "image/svg+xml", "attachment", svgBytes},
			{"png is shown", png.Ref, "image/png", "", pngBytes},
			{"a tool's data", toolRef, "application/json", "attachment", toolData},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp, data := f.get(t, "tok-demo", filePath(tc.ref), nil)
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
				require.Equal(t, tc.data, data)
				h := resp.Header
				require.Equal(t, tc.ctype, h.Get("Content-Type"))
				require.Equal(t, tc.disposition, h.Get("Content-Disposition"))
				require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
				require.Equal(t, "sandbox; default-src 'none'", h.Get("Content-Security-Policy"))
				require.Equal(t, "private, max-age=31536000, immutable", h.Get("Cache-Control"))
				require.Equal(t, `"`+strings.TrimPrefix(tc.ref, "cas://")+`"`, h.Get("ETag"))
			})
		}
	})

	t.Run("a file stored in chunks, whole and by ranges", func(t *testing.T) {
		// Larger than a chunk: stored in chunks and streamed out.
		big := bytes.Repeat([]byte("0123456789abcdef"), 3<<16+5)
		info, err := f.store.WriteTenantBlob(t.Context(), "demo", bytes.NewReader(big), "application/zip", 0)
		require.NoError(t, err)
		resp, data := f.get(t, "tok-demo", filePath(info.Ref), nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
		require.Equal(t, strconv.Itoa(len(big)), resp.Header.Get("Content-Length"))
		require.Equal(t, "application/zip", resp.Header.Get("Content-Type"))
		require.Equal(t, "attachment", resp.Header.Get("Content-Disposition"))
		require.True(t, bytes.Equal(big, data))

		from := 1<<20 - 10 // across the first chunk's end
		resp, data = f.get(t, "tok-demo", filePath(info.Ref), map[string]string{"Range": fmt.Sprintf("bytes=%d-%d", from, from+29)})
		require.Equal(t, http.StatusPartialContent, resp.StatusCode, "%s", data)
		require.Equal(t, big[from:from+30], data)
		require.Equal(t, fmt.Sprintf("bytes %d-%d/%d", from, from+29, len(big)), resp.Header.Get("Content-Range"))

		resp, data = f.get(t, "tok-other", filePath(info.Ref), map[string]string{"Range": "bytes=0-9"})
		requireProblem(t, resp, data, http.StatusNotFound, agent.ErrTypeNotFound, "not found")
	})

	t.Run("if-none-match", func(t *testing.T) {
		etag := `"` + strings.TrimPrefix(png.Ref, "cas://") + `"`
		for _, tc := range []struct {
			name, token, match string
			status             int
		}{
			{"the digest", "tok-demo", etag, http.StatusNotModified},
			{"weak, in a list", "tok-demo", `"x", W/` + etag, http.StatusNotModified},
			{"any", "tok-demo", "*", http.StatusNotModified},
			{"another digest", "tok-demo", `"sha256:00"`, http.StatusOK},
			{"another tenant's, matching", "tok-other", etag, http.StatusNotFound},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp, data := f.get(t, tc.token, filePath(png.Ref), map[string]string{"If-None-Match": tc.match})
				require.Equal(t, tc.status, resp.StatusCode, "%s", data)
				switch tc.status {
				case http.StatusNotModified:
					require.Empty(t, data)
					require.Equal(t, etag, resp.Header.Get("ETag"))
					require.Equal(t, "private, max-age=31536000, immutable", resp.Header.Get("Cache-Control"))
				case http.StatusOK:
					require.Equal(t, pngBytes, data)
				}
			})
		}
	})

	t.Run("refused", func(t *testing.T) {
		unknown := casRef([]byte("never stored"))
		for _, tc := range []struct {
			name, token, path string
			status            int
			title, detail     string
		}{
			{"another tenant's upload", "tok-other", filePath(png.Ref), http.StatusNotFound, agent.ErrTypeNotFound, "not found"},
			{"another tenant's tool data", "tok-other", filePath(toolRef), http.StatusNotFound, agent.ErrTypeNotFound, "not found"},
			{"another tenant's, by digest", "tok-demo", "/v1/files/" + strings.TrimPrefix(otherRef, "cas://"), http.StatusNotFound, agent.ErrTypeNotFound, "not found"},
			{"nothing stored", "tok-demo", filePath(unknown), http.StatusNotFound, agent.ErrTypeNotFound, "not found"},
			{"malformed", "tok-demo", "/v1/files/sha256:abc", http.StatusBadRequest, agent.ErrTypeInvalidRequest, "want cas://sha256:<64 hex digits>"},
			{"not escaped", "tok-demo", "/v1/files/" + png.Ref, http.StatusBadRequest, agent.ErrTypeInvalidRequest, "URL-escaped"},
			{"empty", "tok-demo", "/v1/files/", http.StatusBadRequest, agent.ErrTypeInvalidRequest, "file ref"},
			{"a query", "tok-demo", filePath(png.Ref) + "?download=1", http.StatusBadRequest, agent.ErrTypeInvalidRequest, `unknown query parameter "download"`},
			{"no token", "", filePath(png.Ref), http.StatusUnauthorized, agent.ErrTypeUnauthenticated, "missing bearer token"},
			{"a token that may not read results", "tok-admin", filePath(png.Ref), http.StatusForbidden, agent.ErrTypePermissionDenied, "needs the role user"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp, data := f.get(t, tc.token, tc.path, nil)
				requireProblem(t, resp, data, tc.status, tc.title, tc.detail)
				require.NotContains(t, string(data), "other's")
			})
		}
	})

	t.Run("another tenant's is as nothing", func(t *testing.T) {
		// The same answer, but for the ref it names: nothing says the
		// bytes exist for someone else.
		_, theirs := f.get(t, "tok-other", filePath(png.Ref), nil)
		_, none := f.get(t, "tok-other", filePath(casRef([]byte("never stored"))), nil)
		require.Equal(t, strings.ReplaceAll(string(none), casRef([]byte("never stored")), "REF"), strings.ReplaceAll(string(theirs), png.Ref, "REF"))
	})

	t.Run("methods", func(t *testing.T) {
		for _, tc := range []struct{ method, path string }{{http.MethodPut, "/v1/files"}, {http.MethodDelete, filePath(png.Ref)}, {http.MethodPost, filePath(png.Ref)}} {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, f.url+tc.path, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer tok-demo")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			data, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			_ = resp.Body.Close()
			requireProblem(t, resp, data, http.StatusMethodNotAllowed, agent.ErrTypeInvalidRequest, "does not take "+tc.method)
		}
	})
}

// TestUploadLimitOption: the upload limit is 1 to MaxUploadBytesLimit
// bytes, and the error names its setting.
func TestUploadLimitOption(t *testing.T) {
	tok, err := gateway.NewToken("tok", "demo", "", gateway.RoleUser)
	require.NoError(t, err)
	svc, err := gateway.New(gateway.Options{Tokens: []gateway.Token{tok}})
	require.NoError(t, err)
	for _, tc := range []struct {
		limit int64
		ok    bool
	}{{0, true}, {1, true}, {gateway.MaxUploadBytesLimit, true}, {-1, false}, {gateway.MaxUploadBytesLimit + 1, false}} {
		api, err := gateway.NewHTTPAPI(svc, nil, gateway.HTTPOptions{MaxUploadBytes: tc.limit})
		if !tc.ok {
			require.ErrorContains(t, err, "AGENTFLOW_MAX_UPLOAD_BYTES", "%d", tc.limit)
			continue
		}
		require.NoError(t, err, "%d", tc.limit)
		api.Stop(0)
	}
}

// TestFilesCORS: a page of an allowed origin may upload a file with its
// name in Content-Disposition and revalidate a download, and may read
// the download's ETag.
func TestFilesCORS(t *testing.T) {
	const app = "https://app.example.com"
	srv := startHTTPAPI(t, app)
	for _, tc := range []struct{ method, path, headers string }{
		{http.MethodPost, "/v1/files", "authorization, content-type, content-disposition"},
		{http.MethodGet, filePath(casRef(pngBytes)), "authorization, if-none-match"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodOptions, srv.URL+tc.path, nil)
		require.NoError(t, err)
		req.Header.Set("Origin", app)
		req.Header.Set("Access-Control-Request-Method", tc.method)
		req.Header.Set("Access-Control-Request-Headers", tc.headers)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode, "%s %s", tc.method, tc.path)
		require.Equal(t, app, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+filePath(casRef(pngBytes)), nil)
	require.NoError(t, err)
	req.Header.Set("Origin", app)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Access-Control-Expose-Headers"), "ETag")
}
