// Reads the gateway's AI SDK chat endpoint as a client of AI SDK 7 does:
// DefaultChatTransport (whose api asks for the AI SDK 7 stream with
// ?ai_sdk=7) and readUIMessageStream. Reads {api, token, chats: [{chat,
// agent, prompt, then?}]} on stdin; for each chat sends its prompt and
// writes, as JSON on stdout, the chunks the answer carried, when each
// arrived (ms after the response's head) and the UIMessage the client
// built from them; with then, it sends the chat's messages again with
// then as the next question, as useChat does, and writes that answer's
// message too. Any error the SDK raises exits non-zero.
import { DefaultChatTransport, readUIMessageStream } from 'ai';
import { tapping } from './tap.mjs';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { api, token, chats } = JSON.parse(input);

const user = (id, text) => ({ id, role: 'user', parts: [{ type: 'text', text }] });

const out = [];
for (const { chat, agent, prompt, then } of chats) {
  const taps = [];
  const transport = new DefaultChatTransport({ api, headers: { Authorization: `Bearer ${token}` }, fetch: tapping(taps) });
  const send = async (messages) => {
    const stream = await transport.sendMessages({
      chatId: chat, messages, trigger: 'submit-message', messageId: undefined, abortSignal: undefined, body: { agent },
    });
    let message;
    for await (const m of readUIMessageStream({ stream, terminateOnError: true })) message = m;
    return message;
  };
  const q1 = user('q1', prompt);
  const message = await send([q1]);
  const { chunks, at } = await taps[0];
  const answer = { chunks, at, message };
  if (then != null) answer.next = await send([q1, message, user('q2', then)]);
  out.push(answer);
}
process.stdout.write(JSON.stringify(out));
