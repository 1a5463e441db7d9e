// The process team's workflows: they call agentflow's agents through a
// Nexus endpoint (the service agentflow.v1.Agents), from a namespace of
// their own, knowing nothing of agentflow's but the contract.
import * as nexus from 'nexus-rpc';
import { createNexusServiceClient } from '@temporalio/workflow';

// agents is the service's contract: its operations and their JSON
// (docs/guides/calling-from-workflows.md).
export const agents = nexus.service('agentflow.v1.Agents', {
  run_turn: nexus.operation(), // {prompt, agent_id?, job_id?, session_id?, timeout_sec?} -> the turn's result
  decide: nexus.operation(), //   {job_id, call_id, approval_id?, approved, reason?} -> {call_id, outcome, ...}
  get_result: nexus.operation(), // {job_id} -> the closed turn's result
});

function client(endpoint) {
  return createNexusServiceClient({ endpoint, service: agents });
}

// runAgentTurn runs a turn and returns its result.
export async function runAgentTurn(endpoint, input) {
  return await client(endpoint).executeOperation('run_turn', input, { scheduleToCloseTimeout: '10 minutes' });
}

// decideApproval decides a call waiting for approval in a turn.
export async function decideApproval(endpoint, decision) {
  return await client(endpoint).executeOperation('decide', decision, { scheduleToCloseTimeout: '1 minute' });
}
