// Package guard holds the guardrails that look at what goes into and out
// of a turn: the PII redactor (detectors for emails, phone numbers, card
// numbers that pass Luhn, IBANs that pass mod-97, US social security
// numbers, API keys by shape, and a tenant's own patterns; modes mask,
// hash and placeholder, with a per-turn Vault that maps placeholders back
// to values for the tools allowed to read them). It is pure: callers
// decide where text passes through it.
package guard
