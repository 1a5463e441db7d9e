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
// Streaming: with Request.OnText or Request.OnChunk set, Router streams.
// OnText gets the reply's text fragments only; OnChunk gets typed Chunks in
// the order the provider sent them: text, reasoning, and tool-call
// argument deltas, each naming its call (index, id, tool). What a provider
// yields is what langchaingo v0.1.14 passes on:
//
//   - openai (and ollama, vLLM, OpenRouter, DeepSeek… through the OpenAI
//     API): text; reasoning from the deltas' reasoning_content, and from
//     "reasoning", which OpenRouter, newer vLLM and Ollama send and
//     langchaingo does not read: the transport copies it into
//     reasoning_content (streamed and plain replies); tool-call deltas,
//     which langchaingo hands to the text callback as JSON (a call's first
//     delta with id and name, then argument fragments, without index):
//     Router turns them into deltas named as the Response names the calls.
//   - anthropic: text, and thinking deltas as reasoning (when thinking is
//     enabled, which Request cannot ask for yet); the tool input's
//     input_json_delta reaches no callback, so anthropic tool calls arrive
//     whole, in the Response only.
//
// A stream that breaks off (connection lost, or no final [DONE]) is a
// retryable error, never a truncated success. Response.Reasoning is the
// reply's reasoning, streamed or not; it is never part of the message.
//
// Normalisation: whatever the provider, a Response carries one assistant
// message (text and tool calls with ids and JSON arguments), token usage,
// and a finish reason in OpenAI's vocabulary (stop, tool_calls, length,
// content_filter).
package llm
