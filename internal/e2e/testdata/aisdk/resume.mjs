// A chat whose connection breaks mid-answer and resumes, as the AI SDK 7
// chat (AbstractChat, which useChat is) does it: the transport
// (DefaultChatTransport, its api asking for the AI SDK 7 stream with
// ?ai_sdk=7) reads the answer until its connection breaks after `cut`
// text deltas; the chat takes it for a disconnect and resumeStream()
// reconnects (GET {api}/{chatId}/stream), the stream replayed from the
// message's start. Reads {api, token, chat, agent, prompt, cut} on stdin;
// writes as JSON on stdout the chat's messages when the connection broke
// and at the end, its status and errors, and the chunks each response
// carried.
import { AbstractChat, DefaultChatTransport } from 'ai';
import { cutAfter, tapping } from './tap.mjs';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { api, token, chat, agent, prompt, cut } = JSON.parse(input);

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
const transport = new DefaultChatTransport({ api, headers: { Authorization: `Bearer ${token}` }, fetch: tapping(taps, cutAfter(cut)) });
const errors = [];
const c = new Chat({ id: chat, transport, onError: (e) => errors.push(`${e.name}: ${e.message}`) });

await c.sendMessage({ text: prompt }, { body: { agent } });
const broken = { status: c.status, messages: structuredClone(c.messages) };
await c.resumeStream();

process.stdout.write(JSON.stringify({
  broken, status: c.status, messages: c.messages, errors,
  chunks: (await Promise.all(taps)).map((tap) => tap.chunks),
}));
