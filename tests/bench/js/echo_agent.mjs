// Echo agent on the official A2A JS SDK (@a2a-js/sdk, A2A v1.0, Express, in-memory task
// store), a peer in tests/bench/run.sh. Usage: node echo_agent.mjs PORT
// Every message gets a completed task whose status message repeats the text.
// Card at /.well-known/agent-card.json, JSON-RPC at POST /. Binds 127.0.0.1 only.
import { randomUUID } from 'node:crypto';
import express from 'express';
import { Role, TaskState } from '@a2a-js/sdk';
import { DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { UserBuilder, agentCardHandler, jsonRpcHandler } from '@a2a-js/sdk/server/express';

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0) {
  console.error('usage: node echo_agent.mjs PORT');
  process.exit(2);
}
const base = `http://127.0.0.1:${port}/`;
const card = {
  name: 'Echo',
  description: 'Echoes the text',
  version: '1.0.0',
  supportedInterfaces: [{ url: base, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' }],
  capabilities: { streaming: false, pushNotifications: false, extensions: [] },
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [
    {
      id: 'echo',
      name: 'Echo',
      description: 'Repeats the text',
      tags: ['echo'],
      examples: [],
      inputModes: [],
      outputModes: [],
      securityRequirements: [],
    },
  ],
  securitySchemes: {},
  securityRequirements: [],
  signatures: [],
};

class Echo {
  async execute(ctx, bus) {
    const msg = ctx.userMessage;
    const text = msg.parts
      .filter((p) => p.content?.$case === 'text')
      .map((p) => p.content.value)
      .join('');
    const reply = {
      messageId: randomUUID(),
      contextId: ctx.contextId,
      taskId: ctx.taskId,
      role: Role.ROLE_AGENT,
      parts: [{ content: { $case: 'text', value: text } }],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    };
    const task = {
      id: ctx.taskId,
      contextId: ctx.contextId,
      status: {
        state: TaskState.TASK_STATE_COMPLETED,
        message: reply,
        timestamp: new Date().toISOString(),
      },
      artifacts: [],
      history: [msg],
      metadata: undefined,
    };
    bus.publish({ kind: 'task', data: task });
    bus.finished();
  }

  async cancelTask() {}
}

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Echo());
const app = express();
app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
app.use('/', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
app.listen(port, '127.0.0.1');
