package secrets_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/secrets"
)

func TestValidateRef(t *testing.T) {
	tests := []struct {
		ref  string
		want string // "" when valid
	}{
		{"env:WEATHER_KEY", ""},
		{"env:_PRIVATE", ""},
		{"env:key2", ""},
		{"", "empty secret reference: write scheme:NAME, e.g. env:WEATHER_KEY"},
		{"WEATHER_KEY", "not a secret reference"},
		{":WEATHER_KEY", "not a secret reference"},
		{"vault:kv/weather", `secret reference with unknown scheme "vault" (known: env, file)`},
		{"file:/var/run/secrets/crm-token", ""},
		{"file:/run/secrets/acme/api.key", ""},
		{"file:crm-token", `secret reference "file:crm-token": want an absolute, clean path to a file`},
		{"file:/var/run/secrets/demo/../acme/key", "want an absolute, clean path"},
		{"file:/var/run//secrets/key", "want an absolute, clean path"},
		{"file:/var/run/secrets/", "want an absolute, clean path"},
		{"file:/", "want an absolute, clean path"},
		{"file:", "want an absolute, clean path"},
		{"file:/run/my secret", "a path has no spaces or control characters"},
		{"ENV:WEATHER_KEY", `unknown scheme "ENV"`},
		{"env:", `secret reference "env:": "" is not an environment variable name`},
		{"env:1KEY", `"1KEY" is not an environment variable name`},
		{"env:WEATHER-KEY", `"WEATHER-KEY" is not an environment variable name`},
		{"env:WEATHER KEY", `"WEATHER KEY" is not an environment variable name`},
		{"env:$HOME", `"$HOME" is not an environment variable name`},
		{"env: WEATHER_KEY", `" WEATHER_KEY" is not an environment variable name`},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			err := secrets.ValidateRef(tt.ref)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestValidateRefDoesNotEchoValues(t *testing.T) {
	// Values pasted where a reference belongs.
	tests := []struct {
		value, secret, want string
	}{
		{"sk-live-4f9a8b7c6d", "4f9a8b7c6d", "not a secret reference (not shown, in case it is a secret)"},
		{"Bearer abc:def123", "def123", "not a secret reference"},
		{"p@ss:w0rd!", "w0rd!", "not a secret reference"},
		{"user:hunter2", "hunter2", `unknown scheme "user"`},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			err := secrets.ValidateRef(tt.value)
			require.ErrorContains(t, err, tt.want)
			require.NotContains(t, err.Error(), tt.secret)
		})
	}
}

func TestEnvResolve(t *testing.T) {
	env := map[string]string{"WEATHER_KEY": "wk-123", "EMPTY": ""}
	r := secrets.NewEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	tests := []struct {
		ref    string
		want   string
		err    string // "" when resolved
		notSet bool
	}{
		{ref: "env:WEATHER_KEY", want: "wk-123"},
		{ref: "env:MISSING", err: "secret env:MISSING: environment variable not set", notSet: true},
		{ref: "env:EMPTY", err: "secret env:EMPTY: environment variable is empty: not set", notSet: true},
		{ref: "env:weather_key", err: "secret env:weather_key: environment variable not set", notSet: true},
		{ref: "vault:WEATHER_KEY", err: `unknown scheme "vault"`},
		{ref: "WEATHER_KEY", err: "not a secret reference"},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			v, err := r.Resolve(context.Background(), tt.ref)
			if tt.err == "" {
				require.NoError(t, err)
				require.Equal(t, tt.want, v)
				return
			}
			require.ErrorContains(t, err, tt.err)
			require.Equal(t, tt.notSet, errors.Is(err, secrets.ErrNotSet))
			require.Empty(t, v)
		})
	}
}

func TestSecretNeverPrints(t *testing.T) {
	const value = "wk-5ec7e7-value"
	const shown = "[secret env:WEATHER_KEY]"
	s := secrets.New("env:WEATHER_KEY", value)
	type config struct {
		URL string
		Key secrets.Secret
		Ptr *secrets.Secret
	}
	cfg := config{URL: "https://api.example.com", Key: s, Ptr: &s}

	zapJSON := func(fields ...zap.Field) string {
		var buf bytes.Buffer
		core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&buf), zap.DebugLevel)
		zap.New(core).Info("call", fields...)
		return buf.String()
	}
	zapConsole := func(fields ...zap.Field) string {
		var buf bytes.Buffer
		core := zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(&buf), zap.DebugLevel)
		zap.New(core).Info("call", fields...)
		return buf.String()
	}
	slogOut := func(h func(*bytes.Buffer) slog.Handler, args ...any) string {
		var buf bytes.Buffer
		slog.New(h(&buf)).Info("call", args...)
		return buf.String()
	}
	text := func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) }
	jsonH := func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) }
	mustJSON := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return string(b)
	}
	mustYAML := func(v any) string {
		b, err := yaml.Marshal(v)
		require.NoError(t, err)
		return string(b)
	}

	tests := []struct {
		name string
		out  string
	}{
		{"String", s.String()},
		{"fmt %v", fmt.Sprintf("%v", s)},
		{"fmt %+v", fmt.Sprintf("%+v", s)},
		{"fmt %#v", fmt.Sprintf("%#v", s)},
		{"fmt %s", fmt.Sprintf("%s", s)},
		{"fmt %q", fmt.Sprintf("%q", s)},
		{"fmt %x", fmt.Sprintf("%x", s)},
		{"fmt %d", fmt.Sprintf("%d", s)},
		{"fmt pointer", fmt.Sprintf("%v", &s)},
		{"fmt struct %+v", fmt.Sprintf("%+v", cfg)},
		{"fmt struct %#v", fmt.Sprintf("%#v", cfg)},
		{"fmt Println", fmt.Sprintln(s, cfg)},
		{"error", fmt.Errorf("call with %v", s).Error()},
		{"json", mustJSON(s)},
		{"json struct", mustJSON(cfg)},
		{"json map", mustJSON(map[string]any{"key": s})},
		{"yaml struct", mustYAML(cfg)},
		{"zap Any", zapJSON(zap.Any("key", s))},
		{"zap Stringer", zapJSON(zap.Stringer("key", s))},
		{"zap Reflect", zapJSON(zap.Reflect("key", s))},
		{"zap Any struct", zapJSON(zap.Any("cfg", cfg))},
		{"zap console", zapConsole(zap.Any("key", s), zap.Any("cfg", cfg))},
		{"slog text", slogOut(text, "key", s)},
		{"slog text struct", slogOut(text, "cfg", cfg)},
		{"slog json", slogOut(jsonH, "key", s)},
		{"slog json struct", slogOut(jsonH, "cfg", cfg)},
		{"slog group", slogOut(jsonH, slog.Group("tool", slog.Any("key", s)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NotContains(t, tt.out, value)
			require.Contains(t, tt.out, shown)
		})
	}
}

func TestSecret(t *testing.T) {
	s := secrets.New("env:WEATHER_KEY", "wk-123")
	require.Equal(t, "wk-123", s.Reveal())
	require.Equal(t, "env:WEATHER_KEY", s.Ref())
	require.Equal(t, "[secret]", secrets.Secret{}.String())
}

// TestRecording: a Recording resolver notes each value it resolves in the
// context's Seen, once, and refuses one shorter than MinBytes without
// showing it.
func TestRecording(t *testing.T) {
	env := map[string]string{"KEY": "sk-live-0123456789", "SAME": "sk-live-0123456789", "PIN": "4711", "EIGHT": "12345678"}
	r := secrets.Recording(secrets.NewEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	require.Equal(t, r, secrets.Recording(r), "recording twice is recording once")

	ctx, seen := secrets.WithSeen(context.Background())
	for _, ref := range []string{"env:KEY", "env:SAME", "env:EIGHT", "env:KEY"} {
		v, err := r.Resolve(ctx, ref)
		require.NoError(t, err)
		require.Equal(t, env[ref[len("env:"):]], v)
	}
	got := seen.Secrets()
	require.Len(t, got, 2, "a value is noted once")
	require.Equal(t, "[secret env:KEY]", got[0].String())
	require.Equal(t, "sk-live-0123456789", got[0].Reveal())
	require.Equal(t, "12345678", got[1].Reveal())
	require.Equal(t, 2, seen.Len())

	_, err := r.Resolve(ctx, "env:PIN")
	require.ErrorIs(t, err, secrets.ErrTooShort)
	require.ErrorContains(t, err, "secret env:PIN: the value is 4 bytes, shorter than 8 bytes")
	require.NotContains(t, err.Error(), "4711")
	require.Equal(t, 2, seen.Len(), "a refused value is not noted")

	_, err = r.Resolve(ctx, "env:UNSET")
	require.ErrorIs(t, err, secrets.ErrNotSet)

	// Without a Seen the values resolve all the same.
	v, err := r.Resolve(context.Background(), "env:KEY")
	require.NoError(t, err)
	require.Equal(t, env["KEY"], v)
	require.Nil(t, secrets.SeenIn(context.Background()))
	require.Empty(t, secrets.SeenIn(context.Background()).Secrets())
}

// TestFilesResolve: a mounted secret's content, less its line break;
// missing, empty, unreadable, odd and large files are errors that name
// the reference and never the content.
func TestFilesResolve(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
		return "file:" + p
	}
	tests := []struct {
		name   string
		ref    string
		want   string
		err    string
		notSet bool
	}{
		{name: "a line", ref: write("token", "crm-secret-123\n", 0o600), want: "crm-secret-123"},
		{name: "a CRLF line", ref: write("crlf", "crm-secret-123\r\n", 0o600), want: "crm-secret-123"},
		{name: "no line break", ref: write("bare", "crm-secret-123", 0o600), want: "crm-secret-123"},
		{name: "one line break only", ref: write("two", "crm-secret-123\n\n", 0o600), want: "crm-secret-123\n"},
		{name: "a key of lines", ref: write("pem", "-----BEGIN KEY-----\nabc\n-----END KEY-----\n", 0o600), want: "-----BEGIN KEY-----\nabc\n-----END KEY-----"},
		{name: "missing", ref: "file:" + filepath.Join(dir, "nope"), err: "the file does not exist: not set", notSet: true},
		{name: "empty", ref: write("empty", "\n", 0o600), err: "the file is empty: not set", notSet: true},
		{name: "a folder", ref: "file:" + dir, err: "not a regular file"},
		{name: "too large", ref: write("large", strings.Repeat("x", secrets.MaxFileBytes+1), 0o600), err: "the file is larger than 65536 bytes"},
		{name: "an env reference", ref: "env:CRM_TOKEN", err: "not a file: reference"},
		{name: "a relative path", ref: "file:token", err: "want an absolute, clean path"},
	}
	if os.Geteuid() != 0 { // root reads any file
		tests = append(tests, struct {
			name   string
			ref    string
			want   string
			err    string
			notSet bool
		}{name: "unreadable", ref: write("locked", "crm-secret-123", 0o000), err: "the file cannot be read: permission denied"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := secrets.Files{}.Resolve(context.Background(), tt.ref)
			if tt.err == "" {
				require.NoError(t, err)
				require.Equal(t, tt.want, v)
				return
			}
			require.ErrorContains(t, err, tt.err)
			require.Equal(t, tt.notSet, errors.Is(err, secrets.ErrNotSet))
			if strings.HasPrefix(tt.ref, "file:/") {
				require.ErrorContains(t, err, "secret "+tt.ref+": ", "the error names the reference")
			}
			require.NotContains(t, err.Error(), "crm-secret-123")
			require.NotContains(t, err.Error(), "xxxxxxxx")
			require.Empty(t, v)
		})
	}
}

// TestSchemes: each reference goes to its scheme's resolver.
func TestSchemes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "crm-token")
	require.NoError(t, os.WriteFile(p, []byte("from-a-file-1\n"), 0o600))
	r := secrets.Schemes{"env": secrets.NewEnv(func(string) (string, bool) { return "from-the-env-1", true }), "file": secrets.Files{}}
	v, err := r.Resolve(context.Background(), "env:CRM_TOKEN")
	require.NoError(t, err)
	require.Equal(t, "from-the-env-1", v)
	v, err = r.Resolve(context.Background(), "file:"+p)
	require.NoError(t, err)
	require.Equal(t, "from-a-file-1", v)
	_, err = secrets.Schemes{"env": secrets.NewEnv(os.LookupEnv)}.Resolve(context.Background(), "file:"+p)
	require.ErrorContains(t, err, "secret file:"+p+": this worker resolves no file: references")
	_, err = r.Resolve(context.Background(), "vault:x")
	require.ErrorContains(t, err, `unknown scheme "vault"`)
}

// FuzzValidateRef: a reference a catalog may hold is env: and a variable
// name, or file: and an absolute path without a step up, a step in place
// or a doubled slash, so that a grant of a folder holds.
func FuzzValidateRef(f *testing.F) {
	for _, s := range []string{"env:X", "file:/var/run/secrets/crm-token", "file:/a/../b", "file:a", "file://x", "vault:x", "file:/a/./b", "file:/a/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		if secrets.ValidateRef(ref) != nil {
			return
		}
		if p, ok := strings.CutPrefix(ref, "file:"); ok {
			require.True(t, strings.HasPrefix(p, "/"), ref)
			require.Equal(t, filepath.Clean(p), p, ref)
			require.NotContains(t, "/"+p+"/", "/../", ref)
			return
		}
		require.True(t, strings.HasPrefix(ref, "env:"), ref)
	})
}

// TestFilesStayInTheirFolder is finding 9 of the fourth trust review: a
// file: secret is read through the operator's grant without following a
// link out of the folder the grant names, and never from /proc or /sys,
// however the path leads there; links inside the folder (as a
// Kubernetes Secret's volume makes them) are followed.
func TestFilesStayInTheirFolder(t *testing.T) {
	base := t.TempDir()
	mkdir := func(p string) string {
		require.NoError(t, os.MkdirAll(p, 0o755))
		return p
	}
	write := func(p, content string) {
		require.NoError(t, os.WriteFile(p, []byte(content+"\n"), 0o600))
	}
	link := func(target, p string) {
		require.NoError(t, os.Symlink(target, p))
	}
	ta := mkdir(filepath.Join(base, "secrets", "ta"))
	tb := mkdir(filepath.Join(base, "secrets", "tb"))
	write(filepath.Join(tb, "key"), "tenant-b-secret-1")
	write(filepath.Join(ta, "plain"), "tenant-a-secret-1")
	// A Kubernetes Secret's volume: key -> ..data/key, ..data -> ..2026_01.
	data := mkdir(filepath.Join(ta, "..2026_01"))
	write(filepath.Join(data, "key"), "tenant-a-secret-2")
	link("..2026_01", filepath.Join(ta, "..data"))
	link("..data/key", filepath.Join(ta, "k8s"))
	mkdir(filepath.Join(ta, "sub"))
	link("../plain", filepath.Join(ta, "sub", "up"))
	link("/proc/self/environ", filepath.Join(ta, "envlink"))
	link("../tb/key", filepath.Join(ta, "sibling"))
	link(filepath.Join(tb, "key"), filepath.Join(ta, "absolute"))
	link("sub/../../tb/key", filepath.Join(ta, "dotdot"))
	link("/proc/self", filepath.Join(ta, "self"))
	link("/sys/kernel", filepath.Join(ta, "kernel"))
	// Folders that are themselves links: to a folder, and into /proc.
	real := mkdir(filepath.Join(base, "mounted", "tc"))
	write(filepath.Join(real, "key"), "tenant-c-secret-1")
	link(real, filepath.Join(base, "secrets", "tc"))
	link("/proc/self", filepath.Join(base, "secrets", "td"))

	env := secrets.NewEnv(func(string) (string, bool) { return "", false })
	grants, err := secrets.ParseGrants(strings.Join([]string{
		"ta=file:" + ta + "/*",
		"tb=file:" + filepath.Join(tb, "key"),
		"tc=file:" + filepath.Join(base, "secrets", "tc") + "/*",
		"td=file:" + filepath.Join(base, "secrets", "td") + "/*",
	}, ","))
	require.NoError(t, err)
	r := secrets.Scoped(secrets.Schemes{secrets.SchemeEnv: env, secrets.SchemeFile: secrets.Files{}}, grants)

	tests := []struct {
		name, tenant, path string
		want               string // the value; "" when refused
		err                string
	}{
		{name: "a file in the folder", tenant: "ta", path: filepath.Join(ta, "plain"), want: "tenant-a-secret-1"},
		{name: "links inside the folder", tenant: "ta", path: filepath.Join(ta, "k8s"), want: "tenant-a-secret-2"},
		{name: "a link up, still inside", tenant: "ta", path: filepath.Join(ta, "sub", "up"), want: "tenant-a-secret-1"},
		{name: "a granted file", tenant: "tb", path: filepath.Join(tb, "key"), want: "tenant-b-secret-1"},
		{name: "a folder that is a link", tenant: "tc", path: filepath.Join(base, "secrets", "tc", "key"), want: "tenant-c-secret-1"},
		{name: "a link to the worker's environment", tenant: "ta", path: filepath.Join(ta, "envlink"), err: "a link out of"},
		{name: "a link to another tenant's folder", tenant: "ta", path: filepath.Join(ta, "sibling"), err: "a link out of"},
		{name: "an absolute link", tenant: "ta", path: filepath.Join(ta, "absolute"), err: "a link out of"},
		{name: "a link with .. out", tenant: "ta", path: filepath.Join(ta, "dotdot"), err: "a link out of"},
		{name: "a linked folder into /proc", tenant: "ta", path: filepath.Join(ta, "self", "environ"), err: "a link out of"},
		{name: "a linked folder into /sys", tenant: "ta", path: filepath.Join(ta, "kernel", "uevent_seqnum"), err: "a link out of"},
		{name: "a granted folder that is a link into /proc", tenant: "td", path: filepath.Join(base, "secrets", "td", "environ"), err: "never a secret"},
		{name: "a .. name", tenant: "ta", path: ta + "/../tb/key", err: "want an absolute, clean path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := r.Resolve(secrets.WithTenant(context.Background(), tt.tenant), "file:"+tt.path)
			if tt.err == "" {
				require.NoError(t, err)
				require.Equal(t, tt.want, v)
				return
			}
			require.ErrorContains(t, err, tt.err)
			require.Empty(t, v)
			require.NotContains(t, err.Error(), "tenant-b-secret-1")
			require.NotContains(t, err.Error(), "PATH=")
		})
	}

	// A FIFO is opened without waiting for a writer, and refused.
	require.NoError(t, syscall.Mkfifo(filepath.Join(ta, "fifo"), 0o600))
	_, err = r.Resolve(secrets.WithTenant(context.Background(), "ta"), "file:"+filepath.Join(ta, "fifo"))
	require.ErrorContains(t, err, "not a regular file")

	// Without a grant, as Files is used on its own, the file's folder is
	// the one links may not leave.
	_, err = secrets.Files{}.Resolve(context.Background(), "file:"+filepath.Join(ta, "sibling"))
	require.ErrorContains(t, err, "a link out of")
	v, err := secrets.Files{}.Resolve(context.Background(), "file:"+filepath.Join(ta, "k8s"))
	require.NoError(t, err)
	require.Equal(t, "tenant-a-secret-2", v)
	_, err = secrets.Files{}.Resolve(context.Background(), "file:/proc/self/environ")
	require.ErrorContains(t, err, "never a secret")
}
