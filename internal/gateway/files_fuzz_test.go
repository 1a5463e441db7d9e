package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// FuzzDecodeUpload: any body, Content-Type, Content-Disposition and name
// is an upload of 1 to limit bytes with a media type and a short printable
// name, or a CodeInvalid error that says what is wrong (413 exactly when
// the file is over the limit); never a panic.
func FuzzDecodeUpload(f *testing.F) {
	const limit = 64
	boundary := "b0undary"
	for _, s := range []struct{ ctype, disposition, name, body string }{
		{"image/png", "", "cat.png", "\x89PNG\r\n\x1a\n...."},
		{"", `attachment; filename="a b.txt"`, "", "hello"},
		{"application/octet-stream", "", "", "<html><script>x</script>"},
		{"text/plain; charset=utf-8", `inline; filename*=UTF-8''%E2%82%AC.txt`, "../../etc/passwd", "x"},
		{"multipart/form-data; boundary=" + boundary, "", "",
			"--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"d.txt\"\r\nContent-Type: text/plain\r\n\r\nhi\r\n--" + boundary + "--\r\n"},
		{"multipart/form-data; boundary=" + boundary, "", "",
			"--" + boundary + "\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nhi\r\n--" + boundary + "--\r\n"},
		{"multipart/form-data", "", "", ""},
		{"text/", "attachment; filename=", "\x00", strings.Repeat("a", limit+1)},
	} {
		f.Add(s.ctype, s.disposition, s.name, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, ctype, disposition, name string, body []byte) {
		h := http.Header{}
		h.Set("Content-Type", ctype)
		h.Set("Content-Disposition", disposition)
		query := url.Values{}
		if name != "" {
			query.Set("name", name)
		}
		up, err := decodeUpload(h, query, bytes.NewReader(body), limit)
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.NotEmpty(t, err.Error())
			var hs *HTTPStatusError
			if errors.As(err, &hs) {
				require.Equal(t, http.StatusRequestEntityTooLarge, hs.Status)
				require.Greater(t, len(body), limit, "413 only for a body over the limit")
			}
			return
		}
		require.NotEmpty(t, up.data)
		require.LessOrEqual(t, len(up.data), limit)
		_, _, err = mime.ParseMediaType(up.contentType)
		require.NoError(t, err, "stored type %q", up.contentType)
		require.LessOrEqual(t, len(up.name), maxFileName)
		require.True(t, utf8.ValidString(up.name))
		require.NotContains(t, up.name, "/")
		require.NotContains(t, up.name, `\`)
	})
}

// FuzzParseFileRef: any path value is a well-formed cas:// ref of 64
// lowercase hex digits that names the same digest, or a CodeInvalid
// error; never a panic.
func FuzzParseFileRef(f *testing.F) {
	sum := sha256.Sum256([]byte("x"))
	digest := hex.EncodeToString(sum[:])
	for _, s := range []string{agent.CASRefPrefix + digest, "sha256:" + digest, "sha256:" + strings.ToUpper(digest),
		"cas:/sha256:" + digest, "", "sha256:", "cas://sha256:zz", "artifact://x", "sha256:" + digest + "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := parseFileRef(s)
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			return
		}
		got, ok := strings.CutPrefix(ref, agent.CASRefPrefix)
		require.True(t, ok)
		require.Len(t, got, 64)
		_, err = hex.DecodeString(got)
		require.NoError(t, err)
		require.Equal(t, strings.ToLower(got), got)
		require.True(t, strings.HasSuffix(strings.ToLower(s), got), "the digest asked for")
	})
}
