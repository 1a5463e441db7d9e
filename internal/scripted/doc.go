// Package scripted serves OpenAI's chat-completions API and Anthropic's
// Messages API from a script, so that tests and the offline demo exercise
// the real provider clients (langchaingo's openai package, Anthropic's
// official Go SDK) over real HTTP without a real model.
//
// It imports nothing of agentflow's: it stands where a provider does, on
// the far side of the wire.
//
// A script is a list of rules; the first rule whose conditions match the
// request answers it, with text, tool calls or both, and optionally the
// model's reasoning before them, streamed or not. Both APIs are answered
// from the same rules: an Anthropic request is mapped onto the same
// conversation (see below), and the reply is rendered in the API's own
// shape.
// Rules can inject faults — HTTP errors with Retry-After, a stream cut
// mid-way, or a request held without an answer (stall) — a given number of times before they answer, which is how the
// retry paths of activities and workflows are tested.
//
// Routes: POST /v1/chat/completions and /chat/completions (OpenAI), POST
// /v1/messages and /messages (Anthropic), POST /v1/embeddings and
// /embeddings (OpenAI's embeddings, below), GET /v1/models. Server.URL ends
// in /v1, as OpenAI clients want it; Anthropic's SDK appends v1/messages to
// its base URL, so it is given Server.RootURL (a base URL ending in /v1
// asks for /v1/v1/messages, which is refused with a 404 that says so, as
// the real API refuses it).
//
// Embeddings are deterministic, whatever the model: a text's vector
// (Embedding) is the feature hashing of its lower-cased words (runs of
// letters and digits; weight 1), its pairs of adjacent words (0.5) and
// each word's character trigrams, padded with '^' and '$' (0.25), into
// EmbeddingDims (256) dimensions or the request's "dimensions", each
// feature signed by its FNV-1a hash, then scaled to unit length. Texts
// that share words are near, a word's other forms a little, and a text's
// vector is the same every time, so that tests of search are exact.
// usage.prompt_tokens counts a token per four bytes. An empty input is a
// 400; FailEmbeddings makes the next requests fail with a status.
//
// OpenAI: a stream sends reasoning deltas first, then the text, then each
// tool call — a first delta with its id and name, then its arguments split
// over several chunks of a few bytes, as OpenAI does — and data: [DONE].
//
// Anthropic: a reply is a Message (id msg_…, content blocks, stop_reason
// end_turn, tool_use or max_tokens, usage with input_tokens,
// output_tokens, cache_creation_input_tokens and cache_read_input_tokens).
// Its reasoning is a thinking block first, signed with Signature(text)
// ("sig-" and the hex SHA-256 of the text); the text a text block; each
// tool call a tool_use block (id toolu_…) whose input is the call's
// arguments, which must then be a JSON object. Streamed (stream: true), it
// is the event stream Anthropic sends, each event with its event: line:
// message_start, ping, per block content_block_start, its deltas
// (thinking_delta words then one signature_delta; text_delta words;
// input_json_delta fragments of a few bytes) and content_block_stop, then
// message_delta (stop_reason, usage) and message_stop. A finish_reason of
// the script is translated (stop → end_turn, length → max_tokens,
// tool_calls → tool_use, content_filter → refusal) or sent as given.
// The request is checked as Anthropic checks it, as far as tests need:
// max_tokens is required, roles are user or assistant, a thinking block
// sent back needs its signature, inline data must be base64; messages need
// not alternate. The top-level system (a string or text blocks, joined by
// "\n") is the system prompt; a user message's tool_result blocks are tool
// results (each recorded as a "tool" message, the tool condition matching
// the last one's text) and its other blocks a user message; an assistant
// message's tool_use blocks are its tool calls.
//
// Script format (YAML; the same structure can be built in Go):
//
//	pacing: {chunk_words: 1, delay_ms: 0}   # streaming: words per chunk, delay between chunks
//	reasoning_field: reasoning_content       # or reasoning: the member that carries reasoning
//	prompt_cache: {min_tokens: 1024, block_tokens: 128}  # optional: cache prompts (below)
//	rules:                                   # the first rule that matches wins
//	  - name: calculate
//	    when: {user: '(?i)what is ([-0-9.+*/() ]+)\?'}
//	    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
//	  - name: count-on                       # a loop: a result below 100 asks for one more
//	    when: {tool: '^(?P<n>[0-9]+)$', below: {n: 100}}
//	    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "${n} + 1"}'}]}
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
//	  - name: hung
//	    when: {user: 'hung'}
//	    fault: {stall: true}                 # the first matching request is never answered
//	    reply: {text: 'answered the retry'}
//	  - name: slow
//	    when: {user: 'think hard'}
//	    reply: {text: 'done', delay_ms: 15000}  # answers after 15 s, streamed or not
//	  - name: describe
//	    when: {user: '(?i)describe', has_image: true}
//	    reply: {text: 'A red square.'}
//	  - when: {}                             # matches anything
//	    reply: {text: "I don't know."}
//
// Conditions (all optional, all must hold):
//   - user: regexp on the latest user message. Without tool, the user
//     message must also be the last message of the request.
//   - tool: regexp on the last message, which must be a tool result.
//   - system: regexp on the system prompt (system messages joined by "\n").
//   - model: regexp on the requested model name.
//   - has_image: true (or false): the latest user message carries an
//     image part (or none): OpenAI's image_url parts, Anthropic's image
//     blocks. Like user, without tool the user message must be the last
//     message.
//   - below: {name: bound, …}: each named group, captured by one of the
//     rule's regexps, is a number below its bound. A script loops with
//     it: the number lives in the conversation (a tool's result), a reply
//     asks for the next one, and the bound ends the loop; it holds
//     however much of the conversation a client sends back (a client that
//     compacts older steps still sends the last result).
//
// Reasoning: a reply's reasoning is streamed, word by word like the text
// and before it, as deltas whose member is reasoning_field:
// "reasoning_content" (the default, as DeepSeek and vLLM send it) or
// "reasoning" (as OpenRouter, newer vLLM and Ollama do); a plain reply
// carries it in its message under the same name (Anthropic: a thinking
// block, above). It needs a text or tool calls beside it, and counts as
// reasoning tokens in estimated usage.
//
// Replies expand $1, ${1}, ${name} and $$ like regexp.Expand: numbered
// groups come from the regexp that matched the last message (tool, else
// user), named groups from any condition that matched; reasoning, text and
// arguments are expanded alike. A reply's usage may be given
// (prompt_tokens, completion_tokens, and cached_tokens and
// reasoning_tokens, reported in prompt_tokens_details and
// completion_tokens_details; cache_write_tokens, which only Anthropic
// reports); otherwise it is estimated from word counts, and it is always
// reported (also as the final chunk of a stream when the client asks for
// stream_options.include_usage). Anthropic reports prompt_tokens in three
// parts: cache_read_input_tokens (cached_tokens),
// cache_creation_input_tokens (cache_write_tokens) and input_tokens (the
// rest).
//
// Prompt cache (prompt_cache, off unless set): the server caches prompts
// as providers do and reports the cached part in usage. A prompt is the
// request's tools as sent, then (Anthropic) its system prompt, then each
// message — role, text, reasoning sent back, tool calls (id, name,
// arguments), the id of the call a result answers, and its other parts —
// and its tokens are estimated as its bytes / 4, rounded up (the prompt
// tokens reported, instead of the word count). The prompt is cut
// into blocks of block_tokens (default 128); a request reads from the
// cache the blocks at its start that an earlier request of the same API,
// model and key sent, up to the first that none did, and writes the rest.
// The key is OpenAI's prompt_cache_key, else its user member (else none);
// Anthropic caches the prompt up to the end of its last cache_control
// breakpoint (on a tool: the tools; on a system block: the system prompt;
// on a block of a message: that message; on the request: all of it) and
// nothing without one. A prompt shorter than min_tokens (default 1024)
// reads and writes nothing, and a read shorter than it counts as none, as
// OpenAI caches from 1,024 tokens in steps of 128. Reported: OpenAI's
// prompt_tokens_details.cached_tokens; Anthropic's cache_read_input_tokens
// (read) and cache_creation_input_tokens (written), input_tokens the
// rest. Blocks are remembered by a hash of the prompt up to their end, at
// most max_blocks of them (default 65,536, a few MiB) over all keys, the
// least recently used forgotten first. A rule's usage, when given, is
// reported instead; every matched request is counted, a faulted one too.
//
// Faults: status (an HTTP error with the API's error body: OpenAI's
// {"error": {"message", "type", "code"}}, or Anthropic's {"type": "error",
// "error": {"type", "message"}} whose type follows the status:
// invalid_request_error, rate_limit_error for 429, api_error for 500,
// overloaded_error for 529, …),
// retry_after_sec (the Retry-After header), headers (more headers, such as
// x-ratelimit-reset-requests or anthropic-ratelimit-requests-remaining),
// message (the error message), code (OpenAI's code member; Anthropic's
// errors have none),
// cut_after_chunks (close the connection after that many SSE events, or
// half-way through a non-streamed body) and times (how many matching
// requests fail: default 1, -1 for all). Fault counters are per rule and
// per Server.
//
// Server.RefuseFor answers every matched request with a 429 and a
// Retry-After for a stretch of time, whatever its rule says: a provider
// whose rate limit is used up.
//
// A request no rule matches gets HTTP 400 with an error that quotes the
// last message, so a missing rule is obvious in a test failure.
//
// Strict tools (strict.go): a tool sent with strict: true has its schema
// checked against the API's strict subset, and one outside it refuses
// the request with a 400 naming the place, as the providers do; the
// request records the strict tools' names (Request.StrictTools). A
// strict OpenAI tool's call goes as a strict model writes it: every
// property of its schema there, null for each the script leaves out that
// the schema lets be null.
//
// Server.Requests records each request as it arrived (Request): the API
// it came by, its model, system prompt, messages, tools (their names, and
// the "tools" member byte for byte, so that a test can tell two requests
// share a prefix), temperature, max tokens, structured-output format and
// OpenAI's prompt_cache_key; Anthropic's thinking config and the number of
// its cache_control breakpoints (and, on each message, whether it carries
// one); the body's size in bytes, and the prompt's tokens and cached tokens
// as the prompt cache counted them. Options.OnRequest sees each request as
// it is recorded, for a benchmark that counts requests without keeping
// them. Each message keeps its content parts
// (text, images and files, with their URL, or the length and SHA-256 of
// the data sent inline, so that a test can tell an image reached the
// model), its tool calls, and the thinking and signature an assistant
// message sent back; images a tool returned in an Anthropic tool_result
// are parts of its tool message. OpenAI part types other than text,
// image_url, input_audio, file and refusal are refused, as OpenAI refuses
// them.
package scripted
