// Lists the gateway's A2A tasks with a2a-js's default client (A2A 1.0's
// ListTasks over JSON-RPC). Reads {base, token, calc} on stdin; sends two
// messages in one context and one in a context of its own, then lists
// the context's tasks a page of one at a time, the tenant's tasks, and
// the context's completed ones; writes what each call returned, as 1.0's
// JSON, on stdout. Any error a client raises exits non-zero.
import { ListTasksResponse, Role, Task, TaskState } from '@a2a-js/sdk';
import {
  ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
} from '@a2a-js/sdk/client';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { base, token, calc } = JSON.parse(input);

const fetchImpl = createAuthenticatingFetchWithRetry(fetch, {
  headers: async () => ({ Authorization: `Bearer ${token}` }),
  shouldRetryWithHeaders: async () => undefined,
});
const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory({ fetchImpl })],
  cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
}));
const client = await factory.createFromUrl(`${base}/a2a/${calc}/`);

let n = 0;
const message = (text, contextId = '') => ({
  messageId: `m-${process.pid}-${++n}`, role: Role.ROLE_USER, taskId: '', contextId,
  parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
});
const list = async (params) => ListTasksResponse.toJSON(await client.listTasks({
  tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: '', statusTimestampAfter: undefined, ...params,
}));

const first = Task.toJSON(await client.sendMessage({ message: message('What is 12.5 * 4?') }));
const second = Task.toJSON(await client.sendMessage({ message: message('What is 2 + 3?', first.contextId) }));
const other = Task.toJSON(await client.sendMessage({ message: message('What is 2 + 3?') }));
const out = { first, second, other };

// Temporal's visibility lists a turn shortly after it starts: wait
// until the context's two tasks, and the other, are listed.
for (let i = 0; ; i++) {
  const context = await list({ contextId: first.contextId });
  const all = await list({ pageSize: 100 });
  if (context.tasks?.length === 2 && all.tasks?.some((t) => t.id === other.id)) break;
  if (i === 100) throw new Error(`the tasks are not listed: ${JSON.stringify({ context, all })}`);
  await new Promise((r) => setTimeout(r, 100));
}
out.page1 = await list({ contextId: first.contextId, pageSize: 1, includeArtifacts: true });
out.page2 = await list({ contextId: first.contextId, pageSize: 1, includeArtifacts: true, pageToken: out.page1.nextPageToken });
out.tenant = await list({ pageSize: 100 });
out.completed = await list({ contextId: first.contextId, status: TaskState.TASK_STATE_COMPLETED });
out.working = await list({ contextId: first.contextId, status: TaskState.TASK_STATE_WORKING });
process.stdout.write(JSON.stringify(out));
