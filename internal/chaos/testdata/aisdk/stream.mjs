// Streams one chat message through the gateway's AI SDK door with the
// SDK's own code, as useChat does: DefaultChatTransport sends the message
// and, when the stream breaks, reconnectToStream resumes it (what
// useChat's resumeStream calls); readUIMessageStream builds the message.
// Reads {api, token, chat, agent, prompt, maxResumes} on stdin; writes
// {id, text, deltas, ids, resumed, errors, failure} on stdout: the
// message's id and text, the text deltas of the stream it was built from,
// the message ids every stream started (one, however many streams: a
// resumed stream goes on with the same message), how often it resumed and
// why.
import { DefaultChatTransport, readUIMessageStream } from 'ai';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { api, token, chat, agent, prompt, maxResumes } = JSON.parse(input);

const transport = new DefaultChatTransport({ api, headers: { Authorization: `Bearer ${token}` } });
const question = { id: 'q1', role: 'user', parts: [{ type: 'text', text: prompt }] };
const sleep = ms => new Promise(r => setTimeout(r, ms));
const ids = new Set();

// read builds a message from one stream, keeping the text deltas it
// carried and whether it reached its finish chunk.
async function read(stream) {
  const deltas = [];
  let finished = false;
  const tapped = stream.pipeThrough(new TransformStream({
    transform(chunk, controller) {
      if (chunk.type === 'text-delta') deltas.push(chunk.delta);
      if (chunk.type === 'finish') finished = true;
      if (chunk.type === 'start' && chunk.messageId) ids.add(`message ${chunk.messageId}`);
      controller.enqueue(chunk);
    },
  }));
  let message, error;
  try {
    for await (const m of readUIMessageStream({ stream: tapped, terminateOnError: true })) message = m;
  } catch (err) {
    error = String(err?.message ?? err);
  }
  if (!finished && !error) error = 'the stream ended before its finish chunk';
  return { message, deltas: deltas.join(''), error };
}

const errors = [];
let resumed = 0;
let stream = null;
try {
  stream = await transport.sendMessages({
    chatId: chat, messages: [question], trigger: 'submit-message', messageId: undefined, abortSignal: undefined, body: { agent },
  });
} catch (err) {
  errors.push(String(err?.message ?? err));
}
for (;;) {
  if (stream !== null) {
    const r = await read(stream);
    if (!r.error) {
      const text = r.message.parts.filter(p => p.type === 'text').map(p => p.text).join('');
      process.stdout.write(JSON.stringify({ id: r.message.id, text, deltas: r.deltas, ids: [...ids], resumed, errors }));
      process.exit(0);
    }
    errors.push(r.error);
  }
  if (resumed >= maxResumes) break;
  resumed++;
  await sleep(200);
  try {
    stream = await transport.reconnectToStream({ chatId: chat });
    if (stream === null) {
      process.stdout.write(JSON.stringify({ resumed, errors, failure: 'the chat had no message streaming to resume' }));
      process.exit(0);
    }
  } catch (err) {
    stream = null;
    errors.push(String(err?.message ?? err));
  }
}
process.stdout.write(JSON.stringify({ resumed, errors, failure: `the stream broke ${maxResumes} times` }));
