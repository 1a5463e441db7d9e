// Package scripted serves the OpenAI chat-completions API from a script, so
// that tests and the offline demo exercise the real provider client
// (langchaingo's openai package) over real HTTP without a real model.
//
// A script is a list of rules; the first rule whose conditions match the
// request answers it, with text, tool calls or both, and optionally the
// model's reasoning before them, streamed (SSE: reasoning deltas first,
// then the text, then each tool call — a first delta with its id and name,
// then its arguments split over several chunks of a few bytes, as OpenAI
// does) or not.
// Rules can inject faults — HTTP errors with Retry-After, or a stream cut
// mid-way — a given number of times before they answer, which is how the
// retry paths of activities and workflows are tested.
//
// Script format (YAML; the same structure can be built in Go):
//
//	pacing: {chunk_words: 1, delay_ms: 0}   # streaming: words per chunk, delay between chunks
//	reasoning_field: reasoning_content       # or reasoning: the member that carries reasoning
//	rules:                                   # the first rule that matches wins
//	  - name: calculate
//	    when: {user: '(?i)what is ([-0-9.+*/() ]+)\?'}
//	    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
//	  - name: answer
//	    when: {tool: '(.+)'}
//	    reply: {text: 'The result is $1.'}
//	  - name: think
//	    when: {user: 'why'}
//	    reply: {reasoning: 'The user asks why.', text: 'Because.'}
//	  - name: flaky
//	    when: {user: 'flaky'}
//	    fault: {status: 500, times: 2}       # the first 2 matching requests fail, then reply
//	    reply: {text: 'recovered'}
//	  - name: slow
//	    when: {user: 'think hard'}
//	    reply: {text: 'done', delay_ms: 15000}  # answers after 15 s, streamed or not
//	  - when: {}                             # matches anything
//	    reply: {text: "I don't know."}
//
// Conditions (all optional, all must hold):
//   - user: regexp on the latest user message. Without tool, the user
//     message must also be the last message of the request.
//   - tool: regexp on the last message, which must be a tool result.
//   - system: regexp on the system prompt (system messages joined by "\n").
//   - model: regexp on the requested model name.
//
// Reasoning: a reply's reasoning is streamed, word by word like the text
// and before it, as deltas whose member is reasoning_field:
// "reasoning_content" (the default, as DeepSeek and vLLM send it) or
// "reasoning" (as OpenRouter, newer vLLM and Ollama do); a plain reply
// carries it in its message under the same name. It needs a text or tool
// calls beside it, and counts as reasoning tokens in estimated usage.
//
// Replies expand $1, ${1}, ${name} and $$ like regexp.Expand: numbered
// groups come from the regexp that matched the last message (tool, else
// user), named groups from any condition that matched; reasoning, text and
// arguments are expanded alike. A reply's usage may be given
// (prompt_tokens, completion_tokens, and cached_tokens and
// reasoning_tokens, reported in prompt_tokens_details and
// completion_tokens_details); otherwise it is estimated from word counts,
// and it is always reported (also as the final chunk of a stream when the
// client asks for stream_options.include_usage).
//
// Faults: status (an HTTP error with an OpenAI-style error body),
// retry_after_sec (the Retry-After header), headers (more headers, such as
// x-ratelimit-reset-requests), message (the error message),
// cut_after_chunks (close the connection after that many SSE events, or
// half-way through a non-streamed body) and times (how many matching
// requests fail: default 1, -1 for all). Fault counters are per rule and
// per Server.
//
// A request no rule matches gets HTTP 400 with an error that quotes the
// last message, so a missing rule is obvious in a test failure.
//
// Server.Requests records each request as it arrived: its model, messages,
// tools (their names, and the "tools" member byte for byte, so that a
// test can tell two requests share a prefix), temperature, max tokens and
// OpenAI's prompt_cache_key.
package scripted
