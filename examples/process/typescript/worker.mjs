// The process team's worker in Temporal's TypeScript SDK: the workflows
// of workflows.js on its own queue and namespace.
//
//   npm ci && TEMPORAL_ADDRESS=localhost:7233 TEMPORAL_NAMESPACE=teams node worker.mjs
//
// It prints "ready" once it polls, and stops on SIGINT or SIGTERM.
import { fileURLToPath } from 'node:url';
import { NativeConnection, Worker } from '@temporalio/worker';

const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS ?? 'localhost:7233' });
const worker = await Worker.create({
  connection,
  namespace: process.env.TEMPORAL_NAMESPACE ?? 'teams',
  taskQueue: process.env.PROCESS_TASK_QUEUE ?? 'process-ts',
  workflowsPath: fileURLToPath(new URL('./workflows.js', import.meta.url)),
  bundlerOptions: { ignoreModules: [] },
});
const running = worker.run(); // ends on SIGINT or SIGTERM
console.log('ready');
await running;
await connection.close();
