// Package secrets resolves the secrets that the catalog names by reference.
//
// It imports only the domain: it must not import the tools or the store,
// which resolve secrets through it.
//
// A catalog never holds a secret's value, only a reference to it,
// "scheme:name": env:WEATHER_KEY is the environment variable WEATHER_KEY of
// the worker, and file:/var/run/secrets/crm-token the content of that file
// (a mounted secret: a Kubernetes Secret's volume, a Docker secret).
// ValidateRef checks a reference when the catalog is loaded, without
// reading anything; a Resolver finds the value when a tool needs it,
// inside the activity that makes the call.
//
// main is the only place that reads the environment or files for secrets:
// it builds the resolver (Schemes{"env": NewEnv(os.LookupEnv), "file":
// Files{}}) and injects it. Another scheme (a vault) is another Resolver
// in Schemes, and ValidateRef learns the scheme's name rules.
//
// Errors name the reference, never the value. Secret holds a value that
// prints as its reference in fmt, JSON, slog and zap, so that a secret
// logged or serialized by mistake does not leak.
//
// What a tool was sent back may hold a secret all the same: an API that
// echoes the key it got. So the tool registry resolves through Recording,
// which notes every value it hands out in the Seen of the call's context
// (WithSeen), and cleans the call's output of them all; what sends a
// value in parts (basic authentication's password) notes the parts too
// (NotePart). Values and parts shorter than MinBytes are refused: they
// could not be told apart from ordinary text.
package secrets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"regexp"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"
)

// Resolver finds the value of a secret reference. Implementations are safe
// for concurrent use; their errors name the reference and never a value,
// and wrap ErrNotSet when the reference is valid but has no value.
type Resolver interface {
	Resolve(ctx context.Context, ref string) (string, error)
}

// ErrNotSet is wrapped by errors for a valid reference that has no value.
var ErrNotSet = errors.New("not set")

// schemeRE is the shape of a URI scheme (RFC 3986).
var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// envNameRE is the shape of an environment variable name (POSIX, lower
// case allowed).
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidateRef checks a reference's form: a known scheme and a name that
// the scheme accepts. Only references with a known scheme are quoted in
// errors; anything else may be a value pasted in by mistake.
func ValidateRef(ref string) error {
	_, _, err := parseRef(ref)
	return err
}

// The schemes of references.
const (
	SchemeEnv  = "env"
	SchemeFile = "file"
)

func parseRef(ref string) (scheme, name string, err error) {
	scheme, name, ok := strings.Cut(ref, ":")
	switch {
	case ref == "":
		return "", "", errors.New("empty secret reference: write scheme:NAME, e.g. env:WEATHER_KEY")
	case !ok || !schemeRE.MatchString(scheme):
		return "", "", errors.New("not a secret reference (not shown, in case it is a secret): write scheme:NAME, e.g. env:WEATHER_KEY")
	case scheme == SchemeEnv:
		if !envNameRE.MatchString(name) {
			return "", "", fmt.Errorf("secret reference %q: %q is not an environment variable name (letters, digits and _, not starting with a digit)", ref, name)
		}
	case scheme == SchemeFile:
		if err := checkFilePath(name); err != nil {
			return "", "", fmt.Errorf("secret reference %q: %w", ref, err)
		}
	default:
		return "", "", fmt.Errorf("secret reference with unknown scheme %q (known: env, file)", scheme)
	}
	return scheme, name, nil
}

// maxPathBytes bounds a file: reference's path.
const maxPathBytes = 1024

// checkFilePath accepts an absolute, clean path: no "..", "." or "//"
// that would let a grant of a folder's prefix reach outside it.
func checkFilePath(p string) error {
	switch {
	case len(p) > maxPathBytes:
		return fmt.Errorf("a path of %d bytes; the limit is %d", len(p), maxPathBytes)
	case !utf8.ValidString(p) || strings.ContainsFunc(p, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return errors.New("a path has no spaces or control characters")
	case !strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "/":
		return fmt.Errorf("want an absolute, clean path to a file, e.g. file:/var/run/secrets/crm-token")
	}
	return nil
}

// Env resolves env: references from an environment.
type Env struct {
	lookup func(string) (string, bool)
}

// NewEnv returns a resolver that reads variables with lookup: os.LookupEnv
// in main, a map in tests.
func NewEnv(lookup func(string) (string, bool)) *Env {
	if lookup == nil {
		panic("secrets: NewEnv needs a lookup function")
	}
	return &Env{lookup: lookup}
}

// Resolve returns the value of an env: reference. An unset or empty
// variable is an error that wraps ErrNotSet.
func (e *Env) Resolve(_ context.Context, ref string) (string, error) {
	scheme, name, err := parseRef(ref)
	if err != nil {
		return "", err
	}
	if scheme != SchemeEnv {
		return "", fmt.Errorf("secret %s: not an env: reference", ref)
	}
	v, ok := e.lookup(name)
	switch {
	case !ok:
		return "", fmt.Errorf("secret %s: environment variable %w", ref, ErrNotSet)
	case v == "":
		return "", fmt.Errorf("secret %s: environment variable is empty: %w", ref, ErrNotSet)
	}
	return v, nil
}

// Files resolves file: references by reading the file, a mounted secret:
// its content, less one trailing line break ("\n" or "\r\n", which
// editors and `echo` add), is the value. A file that does not exist or is
// empty is an error that wraps ErrNotSet; one that cannot be read, is no
// regular file or is larger than MaxFileBytes is an error too. Errors name
// the reference, never the content.
//
// A file is read within its folder: the folder the operator's grant names
// when the reference was granted through Scoped (file:/srv/secrets/ta/*
// names /srv/secrets/ta; a grant of one file names the file's own
// folder), else the file's own folder. Links inside that folder are
// followed, as a Kubernetes Secret's volume needs (key -> ..data/key);
// a link that leads out of it, absolute or through "..", is not, so that
// a link in a tenant's folder reads neither another tenant's secrets nor
// the worker's environment (/proc/self/environ). The folder itself may be
// a link, as the operator mounted it. Whatever the path, a file on /proc
// or /sys, or on the other file systems of the kernel's state, is never
// read.
type Files struct{}

// MaxFileBytes bounds a file: secret: a token, a password or a key, not a
// document.
const MaxFileBytes = 64 << 10

// Resolve returns the value of a file: reference.
func (Files) Resolve(ctx context.Context, ref string) (string, error) {
	scheme, name, err := parseRef(ref)
	if err != nil {
		return "", err
	}
	if scheme != SchemeFile {
		return "", fmt.Errorf("secret %s: not a file: reference", ref)
	}
	if systemFile(name) {
		return "", fmt.Errorf("secret %s: a file of /proc, /sys or /dev is never a secret", ref)
	}
	dir := folderIn(ctx, name)
	f, err := openIn(dir, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("secret %s: the file does not exist: %w", ref, ErrNotSet)
	case errors.Is(err, errOutside):
		return "", fmt.Errorf("secret %s: the file is a link out of %s, which is not followed", ref, dir)
	case err != nil:
		return "", fmt.Errorf("secret %s: the file cannot be read: %v", ref, osReason(err))
	}
	defer f.Close()
	info, err := f.Stat()
	switch {
	case err != nil:
		return "", fmt.Errorf("secret %s: the file cannot be read: %v", ref, osReason(err))
	case !info.Mode().IsRegular():
		return "", fmt.Errorf("secret %s: not a regular file", ref)
	}
	if kind := kernelFS(f); kind != "" {
		return "", fmt.Errorf("secret %s: the file is on %s, the kernel's state, which is never a secret", ref, kind)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("secret %s: the file cannot be read: %v", ref, osReason(err))
	case len(b) > MaxFileBytes:
		return "", fmt.Errorf("secret %s: the file is larger than %d bytes", ref, MaxFileBytes)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if v == "" {
		return "", fmt.Errorf("secret %s: the file is empty: %w", ref, ErrNotSet)
	}
	return v, nil
}

// errOutside is a path that leads out of the folder it is read in.
var errOutside = errors.New("a link out of the folder")

// openIn opens the file at name (absolute, clean, inside dir) for
// reading, following no link out of dir (os.Root). It opens without
// waiting: a FIFO would wait for a writer; the caller refuses anything
// but a regular file.
func openIn(dir, name string) (*os.File, error) {
	rel, ok := strings.CutPrefix(name, strings.TrimSuffix(dir, "/")+"/")
	if !ok {
		return nil, errOutside
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		// os.Root's refusal of a path that leaves it has no exported
		// error; its message is stable.
		if pe, ok := errors.AsType[*fs.PathError](err); ok && pe.Err.Error() == "path escapes from parent" {
			return nil, errOutside
		}
		return nil, err
	}
	return f, nil
}

// osReason is what went wrong with a file, without the path the
// reference already names: "permission denied", "is a directory".
func osReason(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}

// Schemes resolves a reference with the resolver of its scheme:
// Schemes{"env": NewEnv(os.LookupEnv), "file": Files{}}.
type Schemes map[string]Resolver

// Resolve hands ref to the resolver of its scheme.
func (s Schemes) Resolve(ctx context.Context, ref string) (string, error) {
	scheme, _, err := parseRef(ref)
	if err != nil {
		return "", err
	}
	r, ok := s[scheme]
	if !ok {
		return "", fmt.Errorf("secret %s: this worker resolves no %s: references", ref, scheme)
	}
	return r.Resolve(ctx, ref)
}

// Secret is a secret value that shows only its reference when printed,
// marshalled or logged. Reveal gives the value, where it is sent.
type Secret struct {
	ref   string
	value string
}

// New returns the secret with the given reference and value.
func New(ref, value string) Secret { return Secret{ref: ref, value: value} }

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return s.value }

// Ref returns the secret's reference.
func (s Secret) Ref() string { return s.ref }

// String returns a placeholder naming the reference: [secret env:WEATHER_KEY].
func (s Secret) String() string {
	if s.ref == "" {
		return "[secret]"
	}
	return "[secret " + s.ref + "]"
}

// Format prints the placeholder for every verb, including %#v and %d,
// which would otherwise print the struct's fields.
func (s Secret) Format(f fmt.State, _ rune) { fmt.Fprint(f, s.String()) }

// MarshalText makes encoding/json, YAML and other text encoders write the
// placeholder.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LogValue makes slog log the placeholder. zap uses String through
// zap.Any and zap.Stringer, and MarshalText through zap.Reflect.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }
