// The orders team's worker in Temporal's TypeScript SDK: the LookupOrder
// activity, which agentflow's turns call as a tool (catalog kind
// activity), told who asked by the agentflow-asked header (one JSON
// payload) that an activity interceptor reads.
//
//   npm ci && TEMPORAL_ADDRESS=localhost:7233 node worker.mjs
//
// It prints "ready" once it polls, and stops on SIGINT or SIGTERM.
import { AsyncLocalStorage } from 'node:async_hooks';
import { NativeConnection, Worker } from '@temporalio/worker';

const asked = new AsyncLocalStorage();

// whoAsked is who asked for the call whose activity runs now: tenant_id,
// caller, agent_id, turn_id, job_id, call_id, tool and key (the same for
// every attempt of the call: key your writes by it).
export function whoAsked() {
  return asked.getStore();
}

class AskedInbound {
  async execute(input, next) {
    const p = input.headers['agentflow-asked'];
    const who = p ? JSON.parse(Buffer.from(p.data).toString('utf8')) : undefined;
    return asked.run(who, () => next(input));
  }
}

// published describes the worker's activities as tools, in the shape
// agentflow reads from the agentflow.tools activity (agentflow.tools/v1):
// a catalog entry that names the queue and LookupOrder, and writes no
// description or parameters, takes them from here when applied.
const published = {
  version: 'agentflow.tools/v1',
  tools: [
    {
      activity_type: 'LookupOrder',
      description: 'Looks an order up by its id: its status, from the TypeScript worker.',
      parameters: {
        type: 'object',
        properties: { order_id: { type: 'string', description: "the order's id, as on the receipt" } },
        required: ['order_id'],
        additionalProperties: false,
      },
    },
  ],
};

const activities = {
  'agentflow.tools': async () => published,
  async LookupOrder({ order_id }) {
    const who = whoAsked();
    if (!who) throw new Error('no one asked');
    return { order_id, status: 'shipped', served_by: 'typescript', tenant: who.tenant_id, key: who.key };
  },
};

const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS ?? 'localhost:7233' });
const worker = await Worker.create({
  connection,
  namespace: process.env.TEMPORAL_NAMESPACE ?? 'default',
  taskQueue: process.env.ORDERS_TASK_QUEUE ?? 'orders',
  activities,
  interceptors: { activity: [() => ({ inbound: new AskedInbound() })] },
});
const running = worker.run(); // ends on SIGINT or SIGTERM
console.log('ready');
await running;
await connection.close();
