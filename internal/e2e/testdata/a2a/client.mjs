// Drives the gateway's A2A agents with a2a-js's own clients: the
// default client (A2A 1.0: card resolution, transport choice, JSON-RPC
// requests, SSE parsing and their types) and, switched to 0.3 with
// legacyCompat, its 0.3 client. Reads {base, token, calc, careful} on
// stdin (base: the HTTP API's URL; token: a token with the user and
// approver roles); writes what each call returned, as 1.0's JSON, on
// stdout. Any error a client raises exits non-zero. An agent's base URL
// ends with a slash: a2a-js resolves the card's path
// (.well-known/agent-card.json) against it as a relative URL.
import { Role, StreamResponse, Task } from '@a2a-js/sdk';
import {
  ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
} from '@a2a-js/sdk/client';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { base, token, calc, careful } = JSON.parse(input);

const fetchImpl = createAuthenticatingFetchWithRetry(fetch, {
  headers: async () => ({ Authorization: `Bearer ${token}` }),
  shouldRetryWithHeaders: async () => undefined,
});

let n = 0;
const message = (text, task) => ({
  messageId: `m-${process.pid}-${++n}`, role: Role.ROLE_USER, taskId: task?.id ?? '', contextId: task?.contextId ?? '',
  parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
});
const decision = (approved, task) => ({
  ...message('', task),
  parts: [{ content: { $case: 'data', value: { approved } }, metadata: undefined, filename: '', mediaType: '' }],
});
const taskJSON = (t) => Task.toJSON(t);
async function collect(events) {
  const out = [];
  for await (const ev of events) out.push(StreamResponse.toJSON(ev));
  return out;
}

// The default client: 1.0, from the card's supportedInterfaces.
const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory({ fetchImpl })],
  cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
}));
const client = await factory.createFromUrl(`${base}/a2a/${calc}/`);
const out = { version: client.protocolVersion };
out.sent = taskJSON(await client.sendMessage({ message: message('What is 12.5 * 4?') }));
out.streamed = await collect(client.sendMessageStream({ message: message('What is 2 + 3?') }));
out.got = taskJSON(await client.getTask({ id: out.sent.id }));

const approvals = await factory.createFromUrl(`${base}/a2a/${careful}/`);
// Cancelled while it waits for approval.
const waiting = await approvals.sendMessage({ message: message('Carefully, what is 1 + 1?') });
out.waiting = taskJSON(waiting);
out.canceled = taskJSON(await approvals.cancelTask({ id: waiting.id }));

// An approval answered as input-required: the stream ends there, a
// subscriber follows the task, and a message for the task decides the
// call and streams the task to its end.
out.asked = await collect(approvals.sendMessageStream({ message: message('Carefully, what is 6 * 7?') }));
const asked = out.asked[0].task;
// The subscription is made before the decision: its first event is the
// task as it waits.
const subscription = approvals.resubscribeTask({ id: asked.id })[Symbol.asyncIterator]();
const first = await subscription.next();
out.decided = await collect(approvals.sendMessageStream({ message: decision(true, asked) }));
out.subscribed = [StreamResponse.toJSON(first.value), ...await collect({ [Symbol.asyncIterator]: () => subscription })];

// The 0.3 client (legacyCompat), on the card's 0.3 interface.
const legacyResolver = new DefaultAgentCardResolver({ fetchImpl, legacyCompat: { enabled: true } });
const legacyFactory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })],
  cardResolver: legacyResolver,
}));
const card = await legacyResolver.resolve(`${base}/a2a/${calc}/`);
card.supportedInterfaces = card.supportedInterfaces.filter((i) => i.protocolVersion === '0.3');
const legacy = await legacyFactory.createFromAgentCard(card);
out.legacy = { version: legacy.protocolVersion };
out.legacy.sent = taskJSON(await legacy.sendMessage({ message: message('What is 12.5 * 4?') }));
out.legacy.streamed = await collect(legacy.sendMessageStream({ message: message('What is 2 + 3?') }));
out.legacy.got = taskJSON(await legacy.getTask({ id: out.legacy.sent.id }));

process.stdout.write(JSON.stringify(out));
