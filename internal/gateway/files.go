package gateway

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway/intake"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// Files: POST /v1/files stores one file as a blob of the caller's tenant
// and answers its ref, "cas://sha256:<hex>", which a turn's parts name;
// GET /v1/files/{ref} answers the bytes behind a ref of the tenant's,
// whoever stored them (an upload, or a tool's output kept by ref). Blobs
// are content-addressed: the same bytes are one blob, stored once, and
// an upload repeated is the same ref; each tenant's content type for them
// is the first it gave, so that nothing of an answer says whether another
// tenant stored the same bytes, or with what type. A file's name is not stored (it is not part of the content);
// the upload's answer only echoes it. A download is streamed from the
// store a chunk at a time, whatever the file's size (a tool's download
// may be a GiB), and serves byte ranges.
//
// An upload is authorized as Start (whoever may start turns), a download
// as GetResult; the tenant is the token's. A ref of another tenant is not
// found, as one of nothing. What is downloaded is the tenant's own data
// but not trusted: it is served so that no browser runs it on the
// gateway's origin (nosniff, a sandboxing Content-Security-Policy, and
// an attachment unless it is a raster image).
const (
	FilesPath = "/v1/files"
	filePath  = "/v1/files/{ref...}"
)

// DefaultMaxUploadBytes is the largest file an upload takes when
// HTTPOptions.MaxUploadBytes is not set: 20 MiB.
const DefaultMaxUploadBytes = 20 << 20

// MaxUploadBytesLimit bounds HTTPOptions.MaxUploadBytes: an upload is
// held in memory while it is checked and stored (a download is not: it
// is streamed).
const MaxUploadBytesLimit = 256 << 20

// multipartSlack is what a multipart body may carry beyond its file's
// bytes: boundaries and part headers.
const multipartSlack = 64 << 10

// maxFileName bounds the name an upload echoes, in bytes.
const maxFileName = 255

// fileCacheControl: a ref names its bytes forever, and only for the
// tenants that own it.
const fileCacheControl = "private, max-age=31536000, immutable"

// fileCSP keeps a downloaded document (HTML, SVG) from running script or
// loading anything, should a browser render it on the gateway's origin.
const fileCSP = "sandbox; default-src 'none'"

// FileInfo is the answer to an upload.
type FileInfo struct {
	// Ref names the bytes: "cas://sha256:<hex>".
	Ref string `json:"ref"`
	// MIMEType is the blob's content type: the upload's, or sniffed from
	// the bytes when it had none; bytes stored before keep their first.
	MIMEType string `json:"mime_type"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
	// Name is the upload's file name, echoed; "" when it had none.
	Name string `json:"name"`
}

// upload is a decoded upload request.
type upload struct {
	data        []byte
	contentType string
	name        string
}

func (a *HTTPAPI) registerFiles(mux *http.ServeMux) {
	mux.HandleFunc("POST "+FilesPath, a.postFile)
	mux.HandleFunc("GET "+filePath, a.getFile)
	a.RefuseOtherMethods(mux, FilesPath, filePath)
}

// postFile stores the request's file for the caller's tenant: 201 and
// its FileInfo.
func (a *HTTPAPI) postFile(w http.ResponseWriter, r *http.Request) {
	r, ok := a.Authorized(w, r, pb.AgentService_Start_FullMethodName)
	if !ok {
		return
	}
	ctx := r.Context()
	up, err := a.readUpload(r)
	if err != nil {
		a.Refuse(w, r, err)
		return
	}
	tenant := TenantOf(ctx)
	ref, err := a.svc.store.PutTenantBlob(ctx, tenant, up.data, up.contentType)
	if err != nil {
		a.Refuse(w, r, err)
		return
	}
	info, err := a.svc.store.TenantBlobInfo(ctx, tenant, ref)
	if err != nil {
		a.Refuse(w, r, err)
		return
	}
	w.Header().Set("Location", FilesPath+"/"+url.PathEscape(ref))
	WriteJSON(w, http.StatusCreated, FileInfo{Ref: info.Ref, MIMEType: info.ContentType, Size: info.Size, Name: up.name})
}

// readUpload reads the request's file, refusing a body larger than the
// limit before reading it when its length is known.
func (a *HTTPAPI) readUpload(r *http.Request) (upload, error) {
	limit := a.maxUpload
	if r.ContentLength > limit+multipartSlack {
		return upload{}, uploadTooLarge(limit)
	}
	if r.ContentLength > limit && !isMultipart(r.Header.Get("Content-Type")) {
		return upload{}, uploadTooLarge(limit)
	}
	allowBody(r, limit+multipartSlack)
	return decodeUpload(r.Header, r.URL.Query(), r.Body, limit)
}

func isMultipart(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "multipart/form-data"
}

// uploadTooLarge is the error of a file over the limit: 413.
func uploadTooLarge(limit int64) error {
	return WithHTTPStatus(http.StatusRequestEntityTooLarge,
		agent.Errorf(agent.CodeInvalid, "the file is larger than %d bytes, the gateway's upload limit (AGENTFLOW_MAX_UPLOAD_BYTES)", limit))
}

// decodeUpload reads an upload: the body is the file, with its
// Content-Type and a name from ?name= or Content-Disposition's filename;
// or a multipart/form-data body with one part named "file", its filename
// and Content-Type. A missing or application/octet-stream type is
// sniffed from the bytes. A file over limit bytes is refused with 413,
// an empty one, or anything malformed, with 400 saying what is wrong.
func decodeUpload(h http.Header, query url.Values, body io.Reader, limit int64) (upload, error) {
	var up upload
	for key, vals := range query {
		switch {
		case key != "name":
			return upload{}, agent.Errorf(agent.CodeInvalid, "unknown query parameter %s: %s takes name", Clip(key), FilesPath)
		case len(vals) > 1:
			return upload{}, agent.Errorf(agent.CodeInvalid, "query parameter name is given %d times: give it once", len(vals))
		}
	}
	if enc := h.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return upload{}, agent.Errorf(agent.CodeInvalid, "Content-Encoding %s: send the file's bytes as they are", Clip(enc))
	}
	mt, params, err := mediaType("Content-Type", h.Get("Content-Type"))
	if err != nil {
		return upload{}, err
	}
	if mt == "multipart/form-data" {
		up, err = decodeMultipart(body, params["boundary"], limit)
	} else {
		up.contentType = formatMediaType(mt, params)
		up.data, err = readFile(body, limit)
		if err == nil {
			up.name, err = dispositionName(h.Get("Content-Disposition"))
		}
	}
	if err != nil {
		return upload{}, err
	}
	if query.Has("name") {
		up.name = query.Get("name")
	}
	if up.name, err = fileName(up.name); err != nil {
		return upload{}, err
	}
	if len(up.data) == 0 {
		return upload{}, agent.Errorf(agent.CodeInvalid, "the file is empty: send its bytes as the body, or as the multipart part \"file\"")
	}
	if mt, _, _ := mime.ParseMediaType(up.contentType); mt == "" || mt == "application/octet-stream" {
		up.contentType = http.DetectContentType(up.data)
	}
	return up, nil
}

// decodeMultipart reads a multipart/form-data body whose one part is
// named "file".
func decodeMultipart(body io.Reader, boundary string, limit int64) (upload, error) {
	if boundary == "" {
		return upload{}, agent.Errorf(agent.CodeInvalid, "Content-Type multipart/form-data has no boundary parameter")
	}
	mr := multipart.NewReader(body, boundary)
	var up upload
	found := false
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return upload{}, bodyError(err, limit, "the multipart body is malformed")
		}
		switch {
		case part.FormName() != "file":
			return upload{}, agent.Errorf(agent.CodeInvalid, "unknown form field %s: the upload takes one part, named \"file\"", Clip(part.FormName()))
		case found:
			return upload{}, agent.Errorf(agent.CodeInvalid, "more than one part named \"file\": an upload stores one file")
		}
		found = true
		mt, params, err := mediaType("the part's Content-Type", part.Header.Get("Content-Type"))
		if err != nil {
			return upload{}, err
		}
		up.contentType = formatMediaType(mt, params)
		up.name = part.FileName()
		if up.data, err = readFile(part, limit); err != nil {
			return upload{}, err
		}
	}
	if !found {
		return upload{}, agent.Errorf(agent.CodeInvalid, "the multipart body has no part named \"file\"")
	}
	return up, nil
}

// readFile reads up to limit bytes; more is 413.
func readFile(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, bodyError(err, limit, "the request body could not be read")
	}
	if int64(len(data)) > limit {
		return nil, uploadTooLarge(limit)
	}
	return data, nil
}

// bodyError is a failed read of the body: 413 when it passed the body's
// bound, the body reader's status when it refused or cut off the body
// (admit), else what says so.
func bodyError(err error, limit int64, what string) error {
	var e *intake.Error
	switch {
	case errors.As(err, &e) && e.Status == http.StatusRequestEntityTooLarge:
		return uploadTooLarge(limit)
	case errors.As(err, &e):
		return WithHTTPStatus(e.Status, e)
	}
	return agent.Errorf(agent.CodeInvalid, "%s: %s", what, Clip(err.Error()))
}

// mediaType parses a Content-Type header; "" is none.
func mediaType(header, v string) (string, map[string]string, error) {
	if strings.TrimSpace(v) == "" {
		return "", nil, nil
	}
	mt, params, err := mime.ParseMediaType(v)
	if err != nil {
		return "", nil, agent.Errorf(agent.CodeInvalid, "%s %s is not a media type (type/subtype; parameters)", header, Clip(v))
	}
	return mt, params, nil
}

// formatMediaType is a parsed type as stored: lowercase, with its
// parameters; "" for none.
func formatMediaType(mt string, params map[string]string) string {
	if mt == "" {
		return ""
	}
	if s := mime.FormatMediaType(mt, params); s != "" {
		return s
	}
	return mt // a parameter it cannot write back is dropped
}

// dispositionName is the filename of a Content-Disposition header.
func dispositionName(v string) (string, error) {
	if strings.TrimSpace(v) == "" {
		return "", nil
	}
	_, params, err := mime.ParseMediaType(v)
	if err != nil {
		return "", agent.Errorf(agent.CodeInvalid, "Content-Disposition %s is malformed: want attachment; filename=\"<name>\"", Clip(v))
	}
	return params["filename"], nil
}

// fileName checks a file name to echo: its last path element, text of
// at most maxFileName bytes without control characters.
func fileName(name string) (string, error) {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	if len(name) > maxFileName || !utf8.ValidString(name) || strings.ContainsFunc(name, unicode.IsControl) {
		return "", agent.Errorf(agent.CodeInvalid, "file name %s: want at most %d bytes of text without control characters", Clip(name), maxFileName)
	}
	return name, nil
}

// getFile answers the bytes behind a ref of the caller's tenant.
func (a *HTTPAPI) getFile(w http.ResponseWriter, r *http.Request) {
	r, ok := a.Authorized(w, r, pb.AgentService_GetResult_FullMethodName)
	if !ok {
		return
	}
	ctx := r.Context()
	ref, err := parseFileRef(r.PathValue("ref"))
	for key := range r.URL.Query() {
		err = FirstError(err, agent.Errorf(agent.CodeInvalid, "unknown query parameter %s: GET %s/{ref} takes none", Clip(key), FilesPath))
	}
	if err != nil {
		a.Refuse(w, r, err)
		return
	}
	tenant := TenantOf(ctx)
	// Ownership first: a 304 would say the blob exists as much as a 200.
	if _, err := a.svc.store.TenantBlobInfo(ctx, tenant, ref); err != nil {
		a.Refuse(w, r, err)
		return
	}
	etag := `"` + strings.TrimPrefix(ref, "cas://") + `"`
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", fileCacheControl)
	h.Set("Vary", "Authorization")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", fileCSP)
	if etagMatches(r.Header.Values("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	// The bytes go out as they are read, a chunk at a time (a file of any
	// size costs the gateway a chunk of memory), and ranges of them when
	// asked (Range, If-Range).
	b, err := a.svc.store.OpenTenantBlob(ctx, tenant, ref)
	if err != nil {
		a.Refuse(w, r, err)
		return
	}
	defer b.Close()
	contentType := b.Info().ContentType
	h.Set("Content-Type", contentType)
	if !rasterImage(contentType) {
		h.Set("Content-Disposition", "attachment")
	}
	http.ServeContent(w, r, "", time.Time{}, b)
}

// parseFileRef reads a file route's ref: "cas://sha256:<hex>" (sent
// URL-escaped, as one path segment) or "sha256:<hex>", the hex in
// either case. It returns the ref as the store names it.
func parseFileRef(s string) (string, error) {
	sum, ok := strings.CutPrefix(s, agent.CASRefPrefix)
	if !ok {
		sum, ok = strings.CutPrefix(s, "sha256:")
	}
	if !ok || len(sum) != 64 || strings.ContainsFunc(sum, func(c rune) bool { return !isHexDigit(c) }) {
		return "", agent.Errorf(agent.CodeInvalid, "file ref %s: want %s<64 hex digits> URL-escaped (cas%%3A%%2F%%2Fsha256%%3A…), or sha256:<64 hex digits>",
			Clip(s), agent.CASRefPrefix)
	}
	return agent.CASRefPrefix + strings.ToLower(sum), nil
}

func isHexDigit(c rune) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// etagMatches reads If-None-Match (a list of entity tags, or *) by weak
// comparison, as RFC 9110 asks of it.
func etagMatches(headers []string, etag string) bool {
	for _, h := range headers {
		for _, tag := range strings.Split(h, ",") {
			tag = strings.TrimSpace(tag)
			if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
				return true
			}
		}
	}
	return false
}

// rasterImage says whether a type is an image a browser only displays:
// served inline, where anything else is an attachment.
func rasterImage(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	switch mt {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// checkMaxUpload validates HTTPOptions.MaxUploadBytes and gives its default.
func checkMaxUpload(n int64) (int64, error) {
	switch {
	case n == 0:
		return DefaultMaxUploadBytes, nil
	case n < 0 || n > MaxUploadBytesLimit:
		return 0, fmt.Errorf("http api: an upload limit of %d bytes: want 1 to %d (AGENTFLOW_MAX_UPLOAD_BYTES)", n, MaxUploadBytesLimit)
	}
	return n, nil
}
