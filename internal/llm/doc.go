// Package llm is the seam between agentflow and language models: the small
// Model interface the activities call, and Router, its implementation over
// langchaingo for the providers agents name in "provider:model" strings:
//
//   - openai: api.openai.com, or any OpenAI-compatible server (vLLM, the
//     scripted test server) through Config.OpenAIBaseURL;
//   - ollama: a local Ollama through its OpenAI-compatible /v1 API;
//   - anthropic: the Anthropic Messages API.
//
// Temporal owns retries, so nothing here retries: a failed call returns at
// once, classified as an *Error that says whether a retry may help and, for
// 429s, how long the provider asked to wait (Retry-After). CallModel turns
// that into a domain error — ModelFailed with the Retry-After as the next
// retry delay, or ModelRejected — and activities.Register classifies it
// for Temporal. langchaingo reports HTTP failures as strings without
// headers, so Router observes status and Retry-After itself, with an
// http.RoundTripper keyed by the call's context.
//
// Streaming: with Request.OnText set, Router streams and hands OnText the
// reply's text fragments only. langchaingo's openai client passes tool-call
// deltas to the same callback as JSON; they are filtered out. A stream that
// breaks off (connection lost, or no final [DONE]) is a retryable error,
// never a truncated success.
//
// Normalisation: whatever the provider, a Response carries one assistant
// message (text and tool calls with ids and JSON arguments), token usage,
// and a finish reason in OpenAI's vocabulary (stop, tool_calls, length,
// content_filter).
package llm
