// Drives the gateway's AI SDK chat endpoint with the SDK's own code:
// DefaultChatTransport (the request useChat sends, and the stream's
// parsing and validation against the SDK's chunk schema) and
// readUIMessageStream (the UIMessage a client builds from the chunks).
// Reads {api, token, chat, approvalChat} on stdin (api may ask for the
// AI SDK 7 stream: ?ai_sdk=7); writes the messages
// it built as JSON on stdout. Any error the SDK raises exits non-zero.
import { DefaultChatTransport, readUIMessageStream } from 'ai';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { api, token, chat, approvalChat } = JSON.parse(input);

const transport = new DefaultChatTransport({ api, headers: { Authorization: `Bearer ${token}` } });

// send sends the chat's messages as useChat does, and reads the answer
// into a UIMessage: the last message when it is the assistant's (a
// message that goes on), else a new one.
async function send(chatId, agent, messages) {
  const last = messages[messages.length - 1];
  const stream = await transport.sendMessages({
    chatId, messages, trigger: 'submit-message', messageId: last.role === 'assistant' ? last.id : undefined,
    abortSignal: undefined, body: { agent },
  });
  let message;
  for await (const m of readUIMessageStream({
    stream, message: last.role === 'assistant' ? structuredClone(last) : undefined, terminateOnError: true,
  })) {
    message = m;
  }
  return message;
}

const user = (id, text) => ({ id, role: 'user', parts: [{ type: 'text', text }] });

const q1 = user('q1', 'What is 12.5 * 4?');
const first = await send(chat, 'assistant', [q1]);
const q2 = user('q2', 'What is 6 * 7?');
const second = await send(chat, 'assistant', [q1, first, q2]);

// The approval, answered as addToolApprovalResponse does.
const q3 = user('q3', 'Carefully, what is 6 * 7?');
const asked = await send(approvalChat, 'careful', [q3]);
const answered = structuredClone(asked);
for (const part of answered.parts) {
  if (part.state === 'approval-requested') {
    part.state = 'approval-responded';
    part.approval = { ...part.approval, approved: true, reason: 'fine' };
  }
}
const decided = await send(approvalChat, 'careful', [q3, answered]);

// Nothing runs in the chat now. Its Conversation records its turn's end
// a moment after the turn's last event: ask until it has.
let resumed;
for (let i = 0; i < 100; i++) {
  resumed = await transport.reconnectToStream({ chatId: chat });
  if (resumed === null) break;
  await resumed.cancel();
  await new Promise(r => setTimeout(r, 100));
}

process.stdout.write(JSON.stringify({ first, second, asked, decided, resumed: resumed === null ? null : 'a stream' }));
