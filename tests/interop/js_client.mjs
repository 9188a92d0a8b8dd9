#!/usr/bin/env node
// Interop checks for Countersign with the official A2A JS SDK (@a2a-js/sdk, pinned in
// package.json; `npm ci` or setup.sh first).
//
//   node js_client.mjs BASE_URL AGENT_ID [--card agent|root]
//                      [--transport jsonrpc|http_json|all] [--dialect auto|0.3]
//                      [--timeout SECONDS] [-v]
//
// Discovery uses the SDK's DefaultAgentCardResolver, which GETs
// new URL('.well-known/agent-card.json', base) with `A2A-Version: 1.0`. The path is
// RELATIVE, so the base needs a trailing slash to keep its last segment:
//   --card agent (default): base BASE_URL/a2a/AGENT_ID/ -> .../a2a/AGENT_ID/.well-known/agent-card.json
//   --card root:            base BASE_URL/              -> /.well-known/agent-card.json
// `--dialect auto` uses the SDK defaults (v1.0 transports, no compat layer).
// `--dialect 0.3` turns on the SDK's opt-in v0.3 layer (`legacyCompat: {enabled: true}` on
// the resolver and transport factories) and points the client at a v0.3 interface (the
// card's, or the card's URL re-labelled protocolVersion 0.3), so the SDK's
// LegacyJsonRpcTransport (message/send, A2A-Version: 0.3) / LegacyRestTransport (/v1/...) run.
//
// Checks per transport (agent: tests/interop/interop-agent.toml):
//   connect   client built for the transport
//   complete  blocking sendMessage, messageId interop-complete-*: completed + artifact
//   stream    sendMessageStream, messageId interop-stream-*: task first, working,
//             artifact, completed last; then getTask = completed
//   cancel    interop-input-* -> input-required; getTask; cancelTask -> canceled; getTask
// One line per check; exit status 1 if any check failed, 2 on bad usage.

import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { Role, TaskState } from '@a2a-js/sdk';
import {
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';

const SDK_VERSION = JSON.parse(
  readFileSync(new URL('./node_modules/@a2a-js/sdk/package.json', import.meta.url), 'utf8'),
).version;
const ARTIFACT_TEXT = 'interop artifact';
const STREAM_ARTIFACT_TEXT = 'interop streamed artifact';
const TERMINAL = new Set(['completed', 'canceled', 'failed', 'rejected']);
const BINDINGS = { jsonrpc: 'JSONRPC', http_json: 'HTTP+JSON' };

class CheckFailed extends Error {}
function expect(cond, msg) {
  if (!cond) throw new CheckFailed(msg);
}

function usage(msg) {
  if (msg) console.error(`js_client: ${msg}`);
  console.error(
    'usage: node js_client.mjs BASE_URL AGENT_ID [--card agent|root] ' +
      '[--transport jsonrpc|http_json|all] [--dialect auto|0.3] [--timeout SECONDS] [-v]',
  );
  process.exit(2);
}

let parsed;
try {
  parsed = parseArgs({
    allowPositionals: true,
    options: {
      card: { type: 'string', default: 'agent' },
      transport: { type: 'string', default: 'all' },
      dialect: { type: 'string', default: 'auto' },
      timeout: { type: 'string', default: '20' },
      verbose: { type: 'boolean', short: 'v', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
} catch (e) {
  usage(e.message);
}
const { values: opts, positionals } = parsed;
if (opts.help) usage();
if (positionals.length !== 2) usage('need BASE_URL and AGENT_ID');
if (!['agent', 'root'].includes(opts.card)) usage(`bad --card ${opts.card}`);
if (!['jsonrpc', 'http_json', 'all'].includes(opts.transport)) usage(`bad --transport ${opts.transport}`);
if (!['auto', '0.3'].includes(opts.dialect)) usage(`bad --dialect ${opts.dialect}`);
const timeoutMs = Number(opts.timeout) * 1000;
if (!(timeoutMs > 0)) usage(`bad --timeout ${opts.timeout}`);

const base = positionals[0].replace(/\/+$/, '');
const agentId = positionals[1];
const cardBase = opts.card === 'agent' ? `${base}/a2a/${agentId}/` : `${base}/`;
const legacy = opts.dialect === '0.3';
const tag = `[@a2a-js/sdk ${SDK_VERSION}${legacy ? ' dialect=0.3' : ''}]`;

// fetch wrapper: logs each request with its A2A-Version header and JSON-RPC method (-v)
const loggingFetch = async (input, init = {}) => {
  if (opts.verbose) {
    const headers = new Headers(init.headers ?? {});
    let rpc = '';
    if (typeof init.body === 'string') {
      try {
        rpc = JSON.parse(init.body).method ?? '';
      } catch {
        /* not JSON */
      }
    }
    const body = typeof init.body === 'string' ? ` ${init.body.slice(0, 400)}` : '';
    console.log(
      `  > ${init.method ?? 'GET'} ${input} A2A-Version=${JSON.stringify(headers.get('a2a-version'))}` +
        `${rpc ? ` rpc=${rpc}` : ''}${body}`,
    );
  }
  const res = await fetch(input, init);
  if (opts.verbose) {
    const ctype = res.headers.get('content-type') ?? '';
    // an SSE body is left alone: reading a clone would buffer the whole stream
    const body = ctype.includes('event-stream') ? '' : ` ${(await res.clone().text()).slice(0, 400)}`;
    console.log(`  < ${res.status} ${ctype}${body}`);
  }
  return res;
};

const compat = legacy ? { legacyCompat: { enabled: true } } : {};
const resolver = new DefaultAgentCardResolver({ fetchImpl: loggingFetch, ...compat });

function stateName(v) {
  // TaskState enum (number) -> 0.3 spelling, e.g. TASK_STATE_INPUT_REQUIRED -> input-required
  const name = typeof v === 'number' ? TaskState[v] : String(v);
  return String(name ?? v).replace(/^TASK_STATE_/, '').toLowerCase().replace(/_/g, '-');
}

function partTexts(parts) {
  return (parts ?? []).filter((p) => p?.content?.$case === 'text').map((p) => p.content.value);
}

function taskView(task) {
  expect(task && typeof task === 'object' && 'status' in task, `expected a Task, got ${JSON.stringify(task)}`);
  return {
    id: task.id,
    state: stateName(task.status?.state),
    statusText: partTexts(task.status?.message?.parts).join(' '),
    artifactTexts: (task.artifacts ?? []).flatMap((a) => partTexts(a.parts)),
  };
}

function eventView(ev) {
  const p = ev?.payload;
  switch (p?.$case) {
    case 'task':
      return { kind: 'task', taskId: p.value.id, state: stateName(p.value.status?.state) };
    case 'statusUpdate':
      return { kind: 'status', taskId: p.value.taskId, state: stateName(p.value.status?.state) };
    case 'artifactUpdate':
      return { kind: 'artifact', taskId: p.value.taskId, text: partTexts(p.value.artifact?.parts).join(' ') };
    case 'message':
      return { kind: 'message', taskId: p.value.taskId };
    default:
      throw new CheckFailed(`stream event without payload: ${JSON.stringify(ev)}`);
  }
}

function fmt(e) {
  if (e.kind === 'artifact') return `artifact(${JSON.stringify(e.text)})`;
  return e.state ? `${e.kind}(${e.state})` : e.kind;
}

function request(prefix, text) {
  const messageId = `${prefix}-${randomUUID().slice(0, 8)}`;
  return {
    messageId,
    params: {
      message: {
        messageId,
        contextId: '',
        taskId: '',
        role: Role.ROLE_USER,
        parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
        metadata: undefined,
        extensions: [],
        referenceTaskIds: [],
      },
    },
  };
}

function describeCard(card) {
  const ifaces = (card.supportedInterfaces ?? [])
    .map((i) => `${i.protocolBinding} ${i.protocolVersion || '?'} ${i.url}`)
    .join(', ');
  return `${JSON.stringify(card.name)} streaming=${card.capabilities?.streaming} interfaces=[${ifaces}]`;
}

function describeError(e) {
  const parts = [];
  let cur = e;
  for (let i = 0; cur && i < 4; i++, cur = cur.cause) {
    parts.push(`${cur.name ?? 'Error'}: ${String(cur.message ?? cur).replace(/\s+/g, ' ').slice(0, 600)}`);
  }
  return parts.join(' | caused by ');
}

let passed = 0;
let failed = 0;
async function check(label, fn) {
  let timer;
  try {
    const detail = await Promise.race([
      fn(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new CheckFailed(`no answer within ${timeoutMs / 1000}s`)), timeoutMs);
      }),
    ]);
    passed++;
    console.log(`PASS ${label}: ${detail}`);
    return detail ?? true;
  } catch (e) {
    failed++;
    console.log(`FAIL ${label}: ${e instanceof CheckFailed ? e.message : describeError(e)}`);
    if (opts.verbose && !(e instanceof CheckFailed)) console.error(e);
    return null;
  } finally {
    clearTimeout(timer);
  }
}

function transportFactory(binding) {
  const o = { fetchImpl: loggingFetch, ...compat };
  return binding === 'JSONRPC' ? new JsonRpcTransportFactory(o) : new RestTransportFactory(o);
}

function cardFor(card, binding) {
  if (!legacy) return { card, note: '' };
  const ifaces = (card.supportedInterfaces ?? []).filter((i) => i.protocolBinding?.toUpperCase() === binding);
  expect(ifaces.length > 0, `card has no ${binding} interface`);
  const v03 = ifaces.find((i) => String(i.protocolVersion).startsWith('0.'));
  const iface = v03 ?? { ...ifaces[0], protocolVersion: '0.3' };
  const note = v03
    ? ' (card lists a v0.3 interface)'
    : ' (no v0.3 interface in the card: forced protocolVersion 0.3 on its URL)';
  return { card: { ...card, supportedInterfaces: [iface] }, note };
}

function checkStreamOrder(events) {
  expect(events.length > 0, 'the stream ended without any event');
  const seq = events.map(fmt).join(' -> ');
  expect(events.every((e) => e.kind !== 'message'), `stream carried a Message, expected task events: ${seq}`);
  if (!legacy) expect(events[0].kind === 'task', `first event must be the Task (v1.0 §3.1.2): ${seq}`);
  const ids = new Set(events.map((e) => e.taskId).filter(Boolean));
  expect(ids.size === 1, `events name ${ids.size} task ids: ${seq}`);
  const iWork = events.findIndex((e) => e.state === 'working');
  const iArt = events.findIndex((e) => e.kind === 'artifact');
  const iDone = events.findIndex((e) => e.state === 'completed');
  expect(iWork >= 0, `no working status before the result: ${seq}`);
  expect(iArt >= 0, `no artifact update: ${seq}`);
  expect(iDone >= 0, `stream did not reach completed: ${seq}`);
  expect(iWork < iArt && iArt < iDone, `events out of order (want working < artifact < completed): ${seq}`);
  expect(iDone === events.length - 1, `events after the terminal state: ${seq}`);
  expect(
    events[iArt].text === STREAM_ARTIFACT_TEXT,
    `artifact text ${JSON.stringify(events[iArt].text)}, expected ${JSON.stringify(STREAM_ARTIFACT_TEXT)}: ${seq}`,
  );
  for (const e of events.slice(0, iDone)) {
    expect(!TERMINAL.has(e.state), `terminal state ${e.state} before the end: ${seq}`);
  }
  return seq;
}

async function runTransport(card, name) {
  const binding = BINDINGS[name];
  const label = `${tag} ${name}`;
  let client;
  const ok = await check(`${label} connect`, async () => {
    const { card: c, note } = cardFor(card, binding);
    const factory = new ClientFactory({ transports: [transportFactory(binding)], cardResolver: resolver });
    client = await factory.createFromAgentCard(c);
    const t = client.transport;
    return `${t.constructor.name} -> ${t.endpoint ?? '?'} (A2A-Version ${client.protocolVersion})${note}`;
  });
  if (!ok) {
    for (const n of ['complete', 'stream', 'cancel']) {
      failed++;
      console.log(`FAIL ${label} ${n}: skipped, no client`);
    }
    return;
  }

  const send = async (prefix, text) => {
    const { messageId, params } = request(prefix, text);
    const result = await client.sendMessage(params);
    expect(result && 'status' in result, `blocking send (${messageId}) answered a Message, expected a Task: ${JSON.stringify(result)}`);
    return taskView(result);
  };

  await check(`${label} complete`, async () => {
    const t = await send('interop-complete', 'interop-complete: please finish');
    expect(t.state === 'completed', `task ${t.id} is ${t.state}, expected completed`);
    expect(t.artifactTexts.includes(ARTIFACT_TEXT), `task ${t.id} artifacts ${JSON.stringify(t.artifactTexts)}, expected ${JSON.stringify(ARTIFACT_TEXT)}`);
    return `task ${t.id} completed, artifact ${JSON.stringify(t.artifactTexts)}, status message ${JSON.stringify(t.statusText)}`;
  });

  await check(`${label} stream`, async () => {
    const { params } = request('interop-stream', 'interop-stream: please stream');
    const events = [];
    for await (const ev of client.sendMessageStream(params)) events.push(eventView(ev));
    const seq = checkStreamOrder(events);
    const taskId = events.find((e) => e.taskId).taskId;
    const t = taskView(await client.getTask({ tenant: '', id: taskId }));
    expect(t.state === 'completed', `getTask after the stream: ${t.state}, expected completed`);
    expect(t.artifactTexts.includes(STREAM_ARTIFACT_TEXT), `getTask after the stream: artifacts ${JSON.stringify(t.artifactTexts)}`);
    return seq;
  });

  await check(`${label} cancel`, async () => {
    const t = await send('interop-input', 'interop-input: ask me');
    expect(t.state === 'input-required', `task ${t.id} is ${t.state}, expected input-required`);
    const g = taskView(await client.getTask({ tenant: '', id: t.id }));
    expect(g.state === 'input-required', `getTask ${t.id}: ${g.state}, expected input-required`);
    const c = taskView(await client.cancelTask({ tenant: '', id: t.id, metadata: undefined }));
    expect(c.state === 'canceled', `cancelTask ${t.id}: ${c.state}, expected canceled`);
    const g2 = taskView(await client.getTask({ tenant: '', id: t.id }));
    expect(g2.state === 'canceled', `getTask ${t.id} after cancel: ${g2.state}, expected canceled`);
    return `task ${t.id}: input-required -> get input-required -> cancel canceled -> get canceled`;
  });
}

console.log(`# js_client ${tag} base=${base} agent=${agentId} card from ${cardBase}`);
let card;
const found = await check(`${tag} discover`, async () => {
  card = await resolver.resolve(cardBase);
  return `${new URL('.well-known/agent-card.json', cardBase)} -> ${describeCard(card)}`;
});
if (found) {
  const names = opts.transport === 'all' ? ['jsonrpc', 'http_json'] : [opts.transport];
  for (const n of names) await runTransport(card, n);
}
console.log(`# ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
