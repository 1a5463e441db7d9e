// Package chatpage is the pages the gateway serves beside its HTTP API:
// the chat page; at /evals, an evaluation's report (EvalsPath); at
// /turn/{tenant}/{job}, a turn's timeline (TurnPath: its steps on a
// waterfall, what each model call read, and "try again from here" with
// the new turn compared to the original, as the report compares a replay
// with its recording); at /turns, the tenant's recent turns, filtered
// (TurnsPath); and at /conversations/{session}, a session's transcript,
// memory, turns and forks (ConversationsPath). Each is a plain HTML
// document, its scripts and style sheets, embedded in the binary, with
// no build step and nothing fetched from elsewhere; the files the pages
// load are all below /chat, and the pages share the chat page's token.
// The chat page, at /chat, is a client of the HTTP API like any other: it
// lists the tenant's agents (GET /v1/agents), sends a session's messages
// and reads the turns' events as Server-Sent Events (POST
// /v1/conversations/{session}/messages:stream, GET
// /v1/turn/{tenant}/{job}/events:stream), decides waiting calls (POST
// /v1/{stream_id}/approvals/{call_id}) and cancels turns (POST
// /v1/{stream_id}/cancel), with the bearer token a person types in; each
// answer links to its turn's page.
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
// whoever opens the page. The other pages take the same token, and the
// dev token the same way.
//
// Every page's answers carry a Content Security Policy that allows
// scripts, styles and connections of the page's own origin only, no
// inline script or style, no frames and no forms: text from models and
// tools is only ever set as text, and the policy is the second line
// should that ever change.
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

const (
	js  = "text/javascript; charset=utf-8"
	css = "text/css; charset=utf-8"
	doc = "text/html; charset=utf-8"
)

// files are the page (at Path) and what the pages load (at Path/<name>):
// page.js is what the turn, turns and conversation pages share (the
// token, the API's calls), diff.js the diff of two turns the report and
// the turn page draw.
var files = map[string]file{
	"":                mustRead("index.html", doc),
	"chat.js":         mustRead("chat.js", js),
	"chat.css":        mustRead("chat.css", css),
	"evals.js":        mustRead("evals.js", js),
	"evals.css":       mustRead("evals.css", css),
	"diff.js":         mustRead("diff.js", js),
	"page.js":         mustRead("page.js", js),
	"turn.js":         mustRead("turn.js", js),
	"turn.css":        mustRead("turn.css", css),
	"turns.js":        mustRead("turns.js", js),
	"conversation.js": mustRead("conversation.js", js),
}

// EvalsPath is where the evaluation report page is served: an
// evaluation's totals, cases and the diffs of replays that differ from
// their recordings (GET /v1/evals/{eval_id}), with the chat page's token.
// Its script and style sheet are the chat page's neighbours.
const EvalsPath = "/evals"

var evalsPage = mustRead("evals.html", doc)

// TurnPath is where a turn's page is served, TurnPath{tenant}/{job}: its
// timeline (GET /v1/turn/{tenant}/{job}/timeline, page after page), the
// request of a model call on demand (GET
// .../timeline/steps/{seq}/request), and "try again from here" (POST
// /v1/turn/{tenant}/{job}/retry) beside a diff of the two turns.
const TurnPath = "/turn/"

// TurnsPath is where the list of the tenant's recent turns is served
// (GET /v1/turns), filtered by agent, status, channel, start and cost.
const TurnsPath = "/turns"

// ConversationsPath is where a conversation's page is served,
// ConversationsPath{session}: its transcript and memory (GET
// /v1/conversations/{session}/transcript), its turns (GET
// /v1/turns?session_id=) and its forks (GET
// /v1/conversations/{session}/forks).
const ConversationsPath = "/conversations/"

var (
	turnPage         = mustRead("turn.html", doc)
	turnsPage        = mustRead("turns.html", doc)
	conversationPage = mustRead("conversation.html", doc)
)

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

// Register serves the pages on mux: GET Path, GET Path/<file>, GET
// EvalsPath, GET TurnPath{tenant}/{job}, GET TurnsPath and GET
// ConversationsPath{session}, and GET DevPath with a dev token.
func Register(mux *http.ServeMux, o Options) {
	mux.HandleFunc("GET "+Path, serve)
	mux.HandleFunc("GET "+Path+"/{file}", serve)
	mux.HandleFunc("GET "+EvalsPath, page(evalsPage))
	mux.HandleFunc("GET "+TurnPath+"{tenant}/{job}", page(turnPage))
	mux.HandleFunc("GET "+TurnsPath, page(turnsPage))
	mux.HandleFunc("GET "+ConversationsPath+"{session}", page(conversationPage))
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

// page serves one page, whatever its path's values: its script reads
// them from its location.
func page(f file) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { write(w, r, f) }
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
