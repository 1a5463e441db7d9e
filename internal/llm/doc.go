// Package llm is the seam between agentflow and language models: the small
// Model interface the activities call, and Router, its implementation for
// the providers agents name in "provider:model" strings:
//
//   - openai: api.openai.com, or any OpenAI-compatible server (vLLM, the
//     scripted test server) through Config.OpenAIBaseURL, over langchaingo;
//   - ollama: a local Ollama through its OpenAI-compatible /v1 API, over
//     langchaingo;
//   - anthropic: the Anthropic Messages API, over Anthropic's own Go SDK
//     (anthropic.go says what langchaingo could not carry).
//
// Temporal owns retries, so nothing here retries: a failed call returns at
// once, classified as an *Error that says whether a retry may help and, for
// 429s, how long the provider asked to wait (Retry-After). CallModel turns
// that into a domain error — ModelFailed with the Retry-After as the next
// retry delay, or ModelRejected — and activities.Register classifies it
// for Temporal. The clients report HTTP failures without their headers,
// so Router observes status and Retry-After itself, with an
// http.RoundTripper keyed by the call's context.
//
// Streaming: with Request.OnText or Request.OnChunk set, Router streams.
// OnText gets the reply's text fragments only; OnChunk gets typed Chunks in
// the order the provider sent them: text, reasoning, and tool-call
// argument deltas, each naming its call (index, id, tool):
//
//   - openai (and ollama, vLLM, OpenRouter, DeepSeek… through the OpenAI
//     API): text; reasoning from the deltas' reasoning_content, and from
//     "reasoning", which OpenRouter, newer vLLM and Ollama send and
//     langchaingo does not read: the transport copies it into
//     reasoning_content (streamed and plain replies); tool-call deltas,
//     which langchaingo hands to the text callback as JSON (a call's first
//     delta with id and name, then argument fragments, without index):
//     Router turns them into deltas named as the Response names the calls.
//   - anthropic: text, thinking (Request.ReasoningBudget) and the tool
//     input's input_json_delta fragments.
//
// A stream that breaks off (connection lost, no final [DONE] or
// message_stop) is a retryable error, never a truncated success.
// Response.Reasoning is the reply's reasoning, streamed or not; it is
// never part of the message's text. The message keeps it block by block
// (agent.Message.Reasoning) with the provider's signatures, and sends
// signed blocks back to Anthropic on the next call, as its API requires.
//
// Content: a message's parts (agent.Part) are sent by their bytes, read
// through Request.Media from their cas:// refs: images to every provider,
// PDFs and text files to Anthropic's; a part a provider cannot take is an
// agent.CodeInvalid error before anything is sent.
//
// Tools: a request's tools go as CompileTools makes them for the call's
// model (or as Request.Specs gives them, compiled beforehand: an agent's
// artefact, agent.Compiled, which Compile makes): with strict: true
// wherever the provider takes strict tools (StrictDialect: OpenAI's
// function tools and the servers that speak them; Claude from the 4.5
// models on), each schema rewritten into the provider's strict subset
// (internal/llm/strictschema: optional properties required and nullable
// for OpenAI, objects closed, keywords strict mode does not take said in
// the description). A schema strict mode cannot describe (a free-form
// object, a value of any type, additional properties allowed) goes as
// written, without strict, and CompiledTool.NotStrict says why: never an
// error at call time. A structured answer's schema (OutputFormat) goes
// strict only when it is in the subset as written, since the answer is
// checked against it as written.
//
// Normalisation: whatever the provider, a Response carries one assistant
// message (text and tool calls with ids and JSON arguments), token usage,
// and a finish reason in OpenAI's vocabulary (stop, tool_calls, length,
// content_filter).
//
// Of agentflow's it imports only the domain: it must not import the
// workflows, the activities or the store.
package llm
