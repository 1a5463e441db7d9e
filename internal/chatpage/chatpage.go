// Package chatpage is the pages the gateway serves beside its HTTP API:
// the chat page and, at /evals, an evaluation's report (EvalsPath). The
// chat page, at /chat, is a plain HTML document, one script and one
// style sheet, embedded in the binary, with no build step and nothing
// fetched from elsewhere. The page is a client of the HTTP API like any other: it
// lists the tenant's agents (GET /v1/agents), sends a session's messages
// and reads the turns' events as Server-Sent Events (POST
// /v1/conversations/{session}/messages:stream, GET
// /v1/turn/{tenant}/{job}/events:stream), decides waiting calls (POST
// /v1/{stream_id}/approvals/{call_id}) and cancels turns (POST
// /v1/{stream_id}/cancel), with the bearer token a person types in.
//
// It imports nothing of agentflow's: the page knows the HTTP API only as
// its clients do.
//
// The token stays in the tab (sessionStorage) and travels only in the
// Authorization header: the page reads event streams with fetch rather
// than EventSource, which cannot set headers and would need the token in
// the URL. The tab also keeps the session's transcript as the events
// built it and, for the turn being answered, the index of the last event
// applied, saved together: a reload shows the transcript and follows the
// turn after that index (Last-Event-ID), so the answer goes on where it
// was, with nothing shown twice.
//
// On a local stack the page starts signed in. The operator's setting
// Options.DevToken (the local stack's dev token, which `go tool task up`
// and `go tool task demo` set) serves it at DevPath, and a tab that holds
// no token of its own takes it, and offers it back with a button once
// another is typed. Without the setting DevPath is not found, and the page
// offers nothing: a deployment with real credentials never hands one to
// whoever opens the page.
//
// The page's answers carry a Content Security Policy that allows scripts,
// styles and connections of the page's own origin only, no frames and no
// forms: text from models and tools is only ever set as text, and the
// policy is the second line should that ever change.
package chatpage

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Path is where the page is served; its script and style sheet are
// below it.
const Path = "/chat"

// ContentSecurityPolicy is the policy of the page and its files.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

//go:embed static
var static embed.FS

// file is one of the page's files, as served.
type file struct {
	name, contentType, etag string
	body                    []byte
}

// files are the page (at Path) and what it loads (at Path/<name>).
var files = map[string]file{
	"":          mustRead("index.html", "text/html; charset=utf-8"),
	"chat.js":   mustRead("chat.js", "text/javascript; charset=utf-8"),
	"chat.css":  mustRead("chat.css", "text/css; charset=utf-8"),
	"evals.js":  mustRead("evals.js", "text/javascript; charset=utf-8"),
	"evals.css": mustRead("evals.css", "text/css; charset=utf-8"),
}

// EvalsPath is where the evaluation report page is served: an
// evaluation's totals, cases and the diffs of replays that differ from
// their recordings (GET /v1/evals/{eval_id}), with the chat page's token.
// Its script and style sheet are the chat page's neighbours.
const EvalsPath = "/evals"

var evalsPage = mustRead("evals.html", "text/html; charset=utf-8")

// mustRead reads an embedded file; one missing is a build mistake that
// the package's test catches.
func mustRead(name, contentType string) file {
	body, err := static.ReadFile("static/" + name)
	if err != nil {
		panic(fmt.Sprintf("chatpage: embedded %s: %v", name, err))
	}
	sum := sha256.Sum256(body)
	return file{name: name, contentType: contentType, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, body: body}
}

// DevPath is where the page finds the local stack's dev token, when the
// operator set one (Options.DevToken): {"token", "tenant"}.
const DevPath = Path + "/dev.json"

// Options configure the pages.
type Options struct {
	// DevToken is a bearer token the chat page signs in with when its tab
	// holds none, and DevTenant its tenant (shown beside it): for a local
	// stack only, as anyone who opens the page gets it. Default: none,
	// and the page asks for a token.
	DevToken, DevTenant string
}

// Register serves the pages on mux: GET Path, GET Path/<file> and GET
// EvalsPath, and GET DevPath with a dev token.
func Register(mux *http.ServeMux, o Options) {
	mux.HandleFunc("GET "+Path, serve)
	mux.HandleFunc("GET "+Path+"/{file}", serve)
	mux.HandleFunc("GET "+EvalsPath, func(w http.ResponseWriter, r *http.Request) { write(w, r, evalsPage) })
	if o.DevToken != "" {
		body, _ := json.Marshal(map[string]string{"token": o.DevToken, "tenant": o.DevTenant}) // strings always encode
		dev := file{name: "dev.json", contentType: "application/json", body: body}
		mux.HandleFunc("GET "+DevPath, func(w http.ResponseWriter, r *http.Request) {
			// Never kept: a stack started again with other settings
			// answers anew.
			w.Header().Set("Cache-Control", "no-store")
			write(w, r, dev)
		})
	}
}

func serve(w http.ResponseWriter, r *http.Request) {
	f, ok := files[r.PathValue("file")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	write(w, r, f)
}

func write(w http.ResponseWriter, r *http.Request, f file) {
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// Revalidated on each load, so that a new gateway's page is the one
	// used; the file never changes while the process runs.
	if h.Get("Cache-Control") == "" {
		h.Set("Cache-Control", "no-cache")
	}
	if f.etag != "" {
		h.Set("ETag", f.etag)
	}
	http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(f.body))
}
