// Reads the gateway's AI SDK chat endpoint as a client of AI SDK 6 does
// (DefaultChatTransport, readUIMessageStream), to check that the stream
// a client gets when it does not ask for AI SDK 7's is one it reads, a
// retried model call included, and that AI SDK 7's is not. Reads {api,
// token, chat, v7Chat, agent, prompt, v7Prompt} on stdin; sends prompt to
// chat at api, and v7Prompt to v7Chat at api?ai_sdk=7; writes as JSON on
// stdout the message the first answer built, and the error the second
// one raised (null if none).
import { DefaultChatTransport, readUIMessageStream } from 'ai';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { api, token, chat, v7Chat, agent, prompt, v7Prompt } = JSON.parse(input);

async function send(url, chatId, text) {
  const transport = new DefaultChatTransport({ api: url, headers: { Authorization: `Bearer ${token}` } });
  const stream = await transport.sendMessages({
    chatId, messages: [{ id: 'q1', role: 'user', parts: [{ type: 'text', text }] }],
    trigger: 'submit-message', messageId: undefined, abortSignal: undefined, body: { agent },
  });
  let message;
  for await (const m of readUIMessageStream({ stream, terminateOnError: true })) message = m;
  return message;
}

const message = await send(api, chat, prompt);
let v7Error = null;
try {
  await send(`${api}?ai_sdk=7`, v7Chat, v7Prompt);
} catch (e) {
  v7Error = `${e.name}: ${e.message}`;
}
process.stdout.write(JSON.stringify({ message, v7Error }));
