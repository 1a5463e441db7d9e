// Meets the gateway's limit of a tenant's open streams with a2a-js's own
// clients, its default A2A 1.0 client and its 0.3 (legacyCompat) client:
// each sends a message and streams one, and each must be refused. Reads
// {base, token, agent} on stdin; writes, for each call, what the client
// raised (its name, the JSON-RPC code and data it read, its message) as
// JSON on stdout.
import { Role } from '@a2a-js/sdk';
import {
  ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
} from '@a2a-js/sdk/client';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { base, token, agent } = JSON.parse(input);

const fetchImpl = createAuthenticatingFetchWithRetry(fetch, {
  headers: async () => ({ Authorization: `Bearer ${token}` }),
  shouldRetryWithHeaders: async () => undefined,
});
let n = 0;
const message = (text) => ({
  messageId: `m-${process.pid}-${++n}`, role: Role.ROLE_USER, taskId: '', contextId: '',
  parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
});

async function refusal(call) {
  try {
    await call();
  } catch (err) {
    return { name: err.name, code: err.envelopeCode ?? null, data: err.data ?? null, message: String(err.message) };
  }
  return { accepted: true };
}
async function refusals(client) {
  return {
    version: client.protocolVersion,
    sent: await refusal(() => client.sendMessage({ message: message('hi') })),
    streamed: await refusal(async () => { for await (const _ of client.sendMessageStream({ message: message('hi') })); }),
  };
}

const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory({ fetchImpl })],
  cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
}));
const out = { v1: await refusals(await factory.createFromUrl(`${base}/a2a/${agent}/`)) };

const legacyResolver = new DefaultAgentCardResolver({ fetchImpl, legacyCompat: { enabled: true } });
const legacyFactory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })],
  cardResolver: legacyResolver,
}));
const card = await legacyResolver.resolve(`${base}/a2a/${agent}/`);
card.supportedInterfaces = card.supportedInterfaces.filter((i) => i.protocolVersion === '0.3');
out.legacy = await refusals(await legacyFactory.createFromAgentCard(card));

process.stdout.write(JSON.stringify(out));
