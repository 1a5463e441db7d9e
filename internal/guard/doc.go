// Package guard holds the guardrails that look at what goes into and out
// of a turn: the PII redactor (detectors for emails, phone numbers, card
// numbers that pass Luhn, IBANs that pass mod-97, US social security
// numbers, API keys by shape, and a tenant's own patterns; modes mask,
// hash and placeholder, with a per-turn Vault that maps placeholders back
// to values for the tools allowed to read them), the output guard that
// holds every channel of a streamed reply — its text, its reasoning, its
// tool calls' arguments — back a window at a time, the injection screen of
// tool outputs, and the custom guards' side of their contract (what an
// HTTP guard is sent and a tool guard's tool is called with, and how
// their verdicts, {"allow", "reason"}, are read and what a failure
// means). Callers decide where text passes through it, and give the
// custom guards the client or the tool runtime they are asked through.
//
// It imports only the domain and internal/structured: it must not import
// the store, the gateway or the tools, which call it.
package guard
