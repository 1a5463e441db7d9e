// A chat that follows a turn it did not start, as the AI SDK 7 chat
// (AbstractChat, which useChat is) does when a page opens on a chat
// whose answer is under way: a new chat of that id, with no messages,
// calls resumeStream() (GET {api}/{chatId}/stream), and the stream,
// replayed from the message's start, builds the answer. Reads {api,
// token, chat} on stdin; writes as JSON on stdout the chat's messages,
// its status and errors, and the chunks the response carried.
import { AbstractChat, DefaultChatTransport } from 'ai';
import { tapping } from './tap.mjs';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { api, token, chat } = JSON.parse(input);

// State is the chat's state, kept as a framework's binding keeps it.
class State {
  status = 'ready';
  error = undefined;
  messages = [];
  pushMessage(m) { this.messages = this.messages.concat(m); }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(i, m) { this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)]; }
  snapshot(x) { return structuredClone(x); }
}

class Chat extends AbstractChat {
  constructor(options) { super({ ...options, state: new State() }); }
}

const taps = [];
const transport = new DefaultChatTransport({ api, headers: { Authorization: `Bearer ${token}` }, fetch: tapping(taps) });
const errors = [];
const c = new Chat({ id: chat, transport, onError: (e) => errors.push(`${e.name}: ${e.message}`) });

await c.resumeStream();

process.stdout.write(JSON.stringify({
  status: c.status, messages: c.messages, errors,
  chunks: (await Promise.all(taps)).map((tap) => tap.chunks),
}));
