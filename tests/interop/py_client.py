#!/usr/bin/env python3
"""Interop checks for Countersign with the official Python A2A SDK (a2a-sdk).

    python py_client.py BASE_URL AGENT_ID [--card agent|root]
                        [--transport jsonrpc|http_json|all] [--dialect auto|0.3] [-v]

Works with whichever a2a-sdk is installed and branches on its version:
  * a2a-sdk 1.x  (.venv-sdk1)  -- A2A v1.0 client; `--dialect 0.3` forces its
    v0.3 compat transports (CompatJsonRpcTransport / CompatRestTransport).
  * a2a-sdk 0.3.x (.venv-sdk03) -- A2A v0.3 client (message/send, /v1/... REST).

Discovery uses the SDK's own card resolver. `--card agent` (default) resolves
from BASE_URL/a2a/AGENT_ID, i.e. GET BASE_URL/a2a/AGENT_ID/.well-known/agent-card.json;
`--card root` resolves from BASE_URL (GET BASE_URL/.well-known/agent-card.json,
the card of the server's first agent). Both SDKs only append
/.well-known/agent-card.json to the base URL; neither tries agent.json.

Checks per transport (the agent is tests/interop/interop-agent.toml):
  discover  card fetched and parsed, a client built for the transport
  complete  blocking send, messageId `interop-complete-*`: task completed with
            the artifact "interop artifact"
  stream    streaming send, messageId `interop-stream-*`: events in order
            (task first, working, artifact, completed last), then GetTask = completed
  cancel    blocking send `interop-input-*` -> input-required; get -> input-required;
            cancel -> canceled; get -> canceled
One line per check (PASS/FAIL/SKIP); exit status 1 if any check failed, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import logging
import sys
import traceback
import uuid

from dataclasses import dataclass, field
from typing import Any

import httpx


SDK_VERSION = importlib.metadata.version('a2a-sdk')
SDK_MAJOR = int(SDK_VERSION.split('.')[0])

ARTIFACT_TEXT = 'interop artifact'
STREAM_ARTIFACT_TEXT = 'interop streamed artifact'
TERMINAL = {'completed', 'canceled', 'failed', 'rejected'}
BINDINGS = {'jsonrpc': 'JSONRPC', 'http_json': 'HTTP+JSON'}


class CheckFailed(Exception):
    """A check's expectation was not met (the message says what and why)."""


def expect(cond: bool, msg: str) -> None:
    if not cond:
        raise CheckFailed(msg)


@dataclass
class Ev:
    """One stream event, SDK-independent."""

    kind: str  # task | status | artifact | message
    task_id: str = ''
    state: str = ''  # 0.3 spelling: working, completed, input-required, ...
    text: str = ''
    final: bool | None = None  # 0.3 status-update `final`

    def __str__(self) -> str:
        s = self.kind
        if self.state:
            s += f'({self.state}{", final" if self.final else ""})'
        if self.kind == 'artifact':
            s += f'({self.text!r})'
        return s


@dataclass
class TaskView:
    """A Task, SDK-independent."""

    id: str
    state: str
    status_text: str = ''
    artifact_texts: list[str] = field(default_factory=list)


def state_name(v1_name: str) -> str:
    """TASK_STATE_INPUT_REQUIRED -> input-required (0.3 spelling)."""
    return v1_name.removeprefix('TASK_STATE_').lower().replace('_', '-')


def new_message_id(prefix: str) -> str:
    return f'{prefix}-{uuid.uuid4().hex[:8]}'


# --------------------------------------------------------------------------
# a2a-sdk 1.x
# --------------------------------------------------------------------------


class Sdk1:
    def __init__(self, http: httpx.AsyncClient, dialect: str):
        self.http = http
        self.dialect = dialect

    async def resolve(self, url: str) -> Any:
        from a2a.client import A2ACardResolver, ClientConfig, ClientFactory

        # Same as ClientFactory.create_from_url(url): constructing the factory puts
        # `A2A-Version: 1.0` on the (shared) httpx client, then the resolver GETs
        # {url}/.well-known/agent-card.json and runs parse_agent_card().
        ClientFactory(ClientConfig(httpx_client=self.http))
        return await A2ACardResolver(self.http, url).get_agent_card()

    def connect(self, card: Any, binding: str, streaming: bool) -> tuple[Any, str]:
        from a2a.client import ClientConfig, ClientFactory
        from a2a.types.a2a_pb2 import AgentCard, AgentInterface

        card_copy = AgentCard()
        card_copy.CopyFrom(card)
        note = ''
        if self.dialect == '0.3':
            ifaces = [i for i in card_copy.supported_interfaces if i.protocol_binding == binding]
            expect(bool(ifaces), f'card has no {binding} interface')
            legacy = [i for i in ifaces if i.protocol_version.startswith('0.')]
            keep = AgentInterface()
            if legacy:
                keep.CopyFrom(legacy[0])
                note = ' (card lists a v0.3 interface)'
            else:
                keep.CopyFrom(ifaces[0])
                keep.protocol_version = '0.3'
                note = ' (no v0.3 interface in the card: forced protocolVersion 0.3 on its URL)'
            del card_copy.supported_interfaces[:]
            card_copy.supported_interfaces.append(keep)
        config = ClientConfig(
            streaming=streaming,
            httpx_client=self.http,
            supported_protocol_bindings=[binding],
        )
        client = ClientFactory(config).create(card_copy)
        return client, note

    @staticmethod
    def describe_card(card: Any) -> str:
        ifaces = ', '.join(
            f'{i.protocol_binding} {i.protocol_version or "?"} {i.url}'
            for i in card.supported_interfaces
        )
        return f'{card.name!r} streaming={card.capabilities.streaming} interfaces=[{ifaces}]'

    @staticmethod
    def transport_name(client: Any) -> str:
        t = client._transport  # noqa: SLF001 - report which transport the factory picked
        inner = getattr(t, '_base', None) or getattr(t, 'transport', None) or t
        return f'{type(inner).__name__} -> {getattr(inner, "url", "?")}'

    @staticmethod
    def _task(task: Any) -> TaskView:
        from a2a.types.a2a_pb2 import TaskState

        texts = [p.text for a in task.artifacts for p in a.parts if p.HasField('text')]
        status_text = ' '.join(
            p.text for p in task.status.message.parts if p.HasField('text')
        )
        return TaskView(task.id, state_name(TaskState.Name(task.status.state)), status_text, texts)

    @staticmethod
    def _event(ev: Any) -> Ev:
        from a2a.types.a2a_pb2 import TaskState

        which = ev.WhichOneof('payload')
        if which == 'task':
            return Ev('task', ev.task.id, state_name(TaskState.Name(ev.task.status.state)))
        if which == 'status_update':
            u = ev.status_update
            return Ev('status', u.task_id, state_name(TaskState.Name(u.status.state)))
        if which == 'artifact_update':
            u = ev.artifact_update
            text = ' '.join(p.text for p in u.artifact.parts if p.HasField('text'))
            return Ev('artifact', u.task_id, text=text)
        if which == 'message':
            return Ev('message', ev.message.task_id)
        raise CheckFailed(f'stream event with no payload: {ev}')

    @staticmethod
    def _request(prefix: str, text: str) -> tuple[Any, str]:
        from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest

        mid = new_message_id(prefix)
        msg = Message(message_id=mid, role=Role.ROLE_USER, parts=[Part(text=text)])
        return SendMessageRequest(message=msg), mid

    async def send(self, client: Any, prefix: str, text: str) -> TaskView:
        req, mid = self._request(prefix, text)
        events = [e async for e in client.send_message(req)]
        expect(len(events) == 1, f'blocking send ({mid}) gave {len(events)} results, expected 1')
        ev = events[0]
        expect(ev.HasField('task'), f'blocking send ({mid}) answered a {ev.WhichOneof("payload")}, expected a task')
        return self._task(ev.task)

    async def stream(self, client: Any, prefix: str, text: str) -> list[Ev]:
        req, _ = self._request(prefix, text)
        return [self._event(e) async for e in client.send_message(req)]

    async def get(self, client: Any, task_id: str) -> TaskView:
        from a2a.types.a2a_pb2 import GetTaskRequest

        return self._task(await client.get_task(GetTaskRequest(id=task_id)))

    async def cancel(self, client: Any, task_id: str) -> TaskView:
        from a2a.types.a2a_pb2 import CancelTaskRequest

        return self._task(await client.cancel_task(CancelTaskRequest(id=task_id)))


# --------------------------------------------------------------------------
# a2a-sdk 0.3.x
# --------------------------------------------------------------------------


class Sdk03:
    def __init__(self, http: httpx.AsyncClient, dialect: str):
        self.http = http

    async def resolve(self, url: str) -> Any:
        from a2a.client import A2ACardResolver

        # Same as ClientFactory.connect(url): GET {url}/.well-known/agent-card.json,
        # then AgentCard.model_validate() (pydantic: url, name, description, version,
        # capabilities, defaultInputModes, defaultOutputModes, skills are required).
        return await A2ACardResolver(self.http, url).get_agent_card()

    def connect(self, card: Any, binding: str, streaming: bool) -> tuple[Any, str]:
        from a2a.client import ClientConfig, ClientFactory

        config = ClientConfig(
            streaming=streaming, httpx_client=self.http, supported_transports=[binding]
        )
        return ClientFactory(config).create(card), ''

    @staticmethod
    def describe_card(card: Any) -> str:
        extra = ', '.join(f'{i.transport} {i.url}' for i in card.additional_interfaces or [])
        return (
            f'{card.name!r} protocolVersion={card.protocol_version} url={card.url} '
            f'preferredTransport={card.preferred_transport} additionalInterfaces=[{extra}] '
            f'streaming={card.capabilities.streaming}'
        )

    @staticmethod
    def transport_name(client: Any) -> str:
        t = client._transport  # noqa: SLF001
        return f'{type(t).__name__} -> {getattr(t, "url", "?")}'

    @staticmethod
    def _text(parts: Any) -> list[str]:
        from a2a.types import TextPart

        return [p.root.text for p in parts or [] if isinstance(p.root, TextPart)]

    def _task(self, task: Any) -> TaskView:
        texts = [t for a in task.artifacts or [] for t in self._text(a.parts)]
        status_text = ' '.join(self._text(task.status.message.parts)) if task.status.message else ''
        return TaskView(task.id, task.status.state.value, status_text, texts)

    def _event(self, item: Any) -> Ev:
        from a2a.types import Message, TaskArtifactUpdateEvent, TaskStatusUpdateEvent

        if isinstance(item, Message):
            return Ev('message', item.task_id or '')
        task, update = item
        if update is None:
            return Ev('task', task.id, task.status.state.value)
        if isinstance(update, TaskStatusUpdateEvent):
            return Ev('status', update.task_id, update.status.state.value, final=update.final)
        if isinstance(update, TaskArtifactUpdateEvent):
            return Ev('artifact', update.task_id, text=' '.join(self._text(update.artifact.parts)))
        raise CheckFailed(f'unexpected stream item {item!r}')

    @staticmethod
    def _message(prefix: str, text: str) -> tuple[Any, str]:
        from a2a.types import Message, Part, Role, TextPart

        mid = new_message_id(prefix)
        return Message(message_id=mid, role=Role.user, parts=[Part(root=TextPart(text=text))]), mid

    async def send(self, client: Any, prefix: str, text: str) -> TaskView:
        from a2a.types import Message

        msg, mid = self._message(prefix, text)
        items = [i async for i in client.send_message(msg)]
        expect(len(items) == 1, f'blocking send ({mid}) gave {len(items)} results, expected 1')
        item = items[0]
        expect(not isinstance(item, Message), f'blocking send ({mid}) answered a Message, expected a Task')
        return self._task(item[0])

    async def stream(self, client: Any, prefix: str, text: str) -> list[Ev]:
        msg, _ = self._message(prefix, text)
        return [self._event(i) async for i in client.send_message(msg)]

    async def get(self, client: Any, task_id: str) -> TaskView:
        from a2a.types import TaskQueryParams

        return self._task(await client.get_task(TaskQueryParams(id=task_id)))

    async def cancel(self, client: Any, task_id: str) -> TaskView:
        from a2a.types import TaskIdParams

        return self._task(await client.cancel_task(TaskIdParams(id=task_id)))


# --------------------------------------------------------------------------
# checks
# --------------------------------------------------------------------------


class Runner:
    def __init__(self, timeout: float):
        self.timeout = timeout
        self.failed = 0
        self.passed = 0

    async def check(self, label: str, coro: Any) -> Any:
        try:
            detail = await asyncio.wait_for(coro, self.timeout)
        except CheckFailed as e:
            self.failed += 1
            print(f'FAIL {label}: {e}', flush=True)
            return None
        except asyncio.TimeoutError:
            self.failed += 1
            print(f'FAIL {label}: no answer within {self.timeout:g}s', flush=True)
            return None
        except Exception as e:  # noqa: BLE001 - an SDK error is a failed check
            self.failed += 1
            print(f'FAIL {label}: {describe_error(e)}', flush=True)
            if logging.getLogger().isEnabledFor(logging.DEBUG):
                traceback.print_exc()
            return None
        self.passed += 1
        print(f'PASS {label}: {detail}', flush=True)
        return detail if detail is not None else True

    def skip(self, label: str, why: str) -> None:
        self.failed += 1
        print(f'FAIL {label}: skipped, {why}', flush=True)


def describe_error(e: BaseException) -> str:
    """The exception, its causes, and the HTTP answer body if one is attached."""
    parts: list[str] = []
    body = ''
    err: BaseException | None = e
    while err is not None and len(parts) < 4:
        parts.append(f'{type(err).__name__}: {err}')
        resp = getattr(err, 'response', None)
        if isinstance(resp, httpx.Response) and not body:
            try:
                body = f'response body: {resp.text[:400]}'
            except httpx.ResponseNotRead:  # streamed answer, body not read
                pass
        err = err.__cause__ or err.__context__
    if body:
        parts.append(body)
    return ' | '.join(p.replace('\n', ' ')[:600] for p in parts)


def check_stream_order(events: list[Ev], legacy: bool) -> str:
    expect(bool(events), 'the stream ended without any event')
    seq = ' -> '.join(str(e) for e in events)
    expect(all(e.kind != 'message' for e in events), f'stream carried a Message, expected task events: {seq}')
    if not legacy:
        expect(events[0].kind == 'task', f'first event must be the Task (v1.0 §3.1.2): {seq}')
    ids = {e.task_id for e in events if e.task_id}
    expect(len(ids) == 1, f'events name {len(ids)} task ids {sorted(ids)}: {seq}')
    kinds = [e.kind for e in events]
    states = [e.state for e in events if e.state]
    expect('working' in states, f'no working status before the result: {seq}')
    expect('artifact' in kinds, f'no artifact update: {seq}')
    i_work = next(i for i, e in enumerate(events) if e.state == 'working')
    i_art = kinds.index('artifact')
    i_done = next((i for i, e in enumerate(events) if e.state == 'completed'), None)
    expect(i_done is not None, f'stream did not reach completed: {seq}')
    expect(i_work < i_art < i_done, f'events out of order (want working < artifact < completed): {seq}')
    expect(i_done == len(events) - 1, f'events after the terminal state: {seq}')
    art = events[i_art].text
    expect(art == STREAM_ARTIFACT_TEXT, f'artifact text {art!r}, expected {STREAM_ARTIFACT_TEXT!r}: {seq}')
    for e in events[:i_done]:
        expect(e.state not in TERMINAL, f'terminal state {e.state} before the end: {seq}')
    if events[i_done].final is not None:  # only the 0.3.x SDK surfaces `final`
        expect(events[i_done].final is True, f'v0.3 completed status-update lacks final=true: {seq}')
    return seq


async def run_transport(
    run: Runner, sdk: Any, card: Any, label: str, binding: str, legacy_stream: bool
) -> None:
    # discover/connect
    async def connect() -> str:
        blocking, note = sdk.connect(card, binding, streaming=False)
        streaming, _ = sdk.connect(card, binding, streaming=True)
        clients['blocking'], clients['streaming'] = blocking, streaming
        return f'{sdk.transport_name(blocking)}{note}'

    clients: dict[str, Any] = {}
    if not await run.check(f'{label} connect', connect()):
        for name in ('complete', 'stream', 'cancel'):
            run.skip(f'{label} {name}', 'no client')
        return
    blocking, streaming = clients['blocking'], clients['streaming']

    # (1) blocking send -> completed with an artifact
    async def complete() -> str:
        t = await sdk.send(blocking, 'interop-complete', 'interop-complete: please finish')
        expect(t.state == 'completed', f'task {t.id} is {t.state}, expected completed')
        expect(ARTIFACT_TEXT in t.artifact_texts, f'task {t.id} artifacts {t.artifact_texts}, expected {ARTIFACT_TEXT!r}')
        return f'task {t.id} completed, artifact {t.artifact_texts}, status message {t.status_text!r}'

    await run.check(f'{label} complete', complete())

    # (2) streaming send -> ordered events ending in completed
    async def stream() -> str:
        events = await sdk.stream(streaming, 'interop-stream', 'interop-stream: please stream')
        seq = check_stream_order(events, legacy_stream)
        task_id = next(e.task_id for e in events if e.task_id)
        t = await sdk.get(blocking, task_id)
        expect(t.state == 'completed', f'GetTask after the stream: {t.state}, expected completed')
        expect(STREAM_ARTIFACT_TEXT in t.artifact_texts, f'GetTask after the stream: artifacts {t.artifact_texts}')
        return seq

    await run.check(f'{label} stream', stream())

    # (3) input-required -> get -> cancel -> get
    async def cancel() -> str:
        t = await sdk.send(blocking, 'interop-input', 'interop-input: ask me')
        expect(t.state == 'input-required', f'task {t.id} is {t.state}, expected input-required')
        g = await sdk.get(blocking, t.id)
        expect(g.state == 'input-required', f'GetTask {t.id}: {g.state}, expected input-required')
        c = await sdk.cancel(blocking, t.id)
        expect(c.state == 'canceled', f'CancelTask {t.id}: {c.state}, expected canceled')
        g2 = await sdk.get(blocking, t.id)
        expect(g2.state == 'canceled', f'GetTask {t.id} after cancel: {g2.state}, expected canceled')
        return f'task {t.id}: input-required -> get input-required -> cancel canceled -> get canceled'

    await run.check(f'{label} cancel', cancel())


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('base_url', help='server base URL, e.g. http://127.0.0.1:7717')
    ap.add_argument('agent_id', help='agent id, e.g. interop')
    ap.add_argument('--card', choices=['agent', 'root'], default='agent',
                    help='resolve the card from BASE_URL/a2a/AGENT_ID (agent, default) or BASE_URL (root)')
    ap.add_argument('--transport', choices=['jsonrpc', 'http_json', 'all'], default='all')
    ap.add_argument('--dialect', choices=['auto', '0.3'], default='auto',
                    help='a2a-sdk 1.x only: 0.3 forces the SDK\'s v0.3 compat transport')
    ap.add_argument('--timeout', type=float, default=20.0, help='seconds per check (default 20)')
    ap.add_argument('-v', '--verbose', action='store_true', help='log every HTTP request/response')
    args = ap.parse_args()
    if SDK_MAJOR < 1 and args.dialect != 'auto':
        ap.error(f'--dialect only applies to a2a-sdk 1.x; a2a-sdk {SDK_VERSION} speaks only v0.3')

    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format='  %(name)s: %(message)s')
    for noisy in ('httpcore', 'a2a'):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    base = args.base_url.rstrip('/')
    agent_url = f'{base}/a2a/{args.agent_id}'
    card_base = agent_url if args.card == 'agent' else base

    async def log_request(req: httpx.Request) -> None:
        if args.verbose:
            body = req.content[:400].decode('utf-8', 'replace') if req.content else ''
            method = ''
            try:
                method = json.loads(req.content).get('method', '') if req.content else ''
            except (ValueError, AttributeError):
                pass
            print(f'  > {req.method} {req.url} A2A-Version={req.headers.get("a2a-version")!r}'
                  f'{" rpc=" + method if method else ""} {body}', flush=True)

    async def log_response(resp: httpx.Response) -> None:
        if args.verbose:
            ctype = resp.headers.get('content-type') or ''
            body = ''
            if 'event-stream' not in ctype:  # reading an SSE body here would eat the stream
                await resp.aread()
                body = ' ' + resp.text[:400]
            print(f'  < {resp.status_code} {ctype}{body}', flush=True)

    run = Runner(args.timeout)
    tag = f'[a2a-sdk {SDK_VERSION}{" dialect=0.3" if args.dialect == "0.3" else ""}]'
    print(f'# py_client {tag} base={base} agent={args.agent_id} card from {card_base}', flush=True)

    async with httpx.AsyncClient(
        timeout=httpx.Timeout(args.timeout),
        event_hooks={'request': [log_request], 'response': [log_response]},
    ) as http:
        sdk = Sdk1(http, args.dialect) if SDK_MAJOR >= 1 else Sdk03(http, args.dialect)
        cards: dict[str, Any] = {}

        async def discover() -> str:
            cards['card'] = await sdk.resolve(card_base)
            return f'{card_base}/.well-known/agent-card.json -> {sdk.describe_card(cards["card"])}'

        if not await run.check(f'{tag} discover', discover()):
            print(f'# {run.passed} passed, {run.failed} failed', flush=True)
            return 1

        transports = ['jsonrpc', 'http_json'] if args.transport == 'all' else [args.transport]
        legacy_stream = SDK_MAJOR < 1 or args.dialect == '0.3'
        for t in transports:
            await run_transport(run, sdk, cards['card'], f'{tag} {t}', BINDINGS[t], legacy_stream)

    print(f'# {run.passed} passed, {run.failed} failed', flush=True)
    return 1 if run.failed else 0


if __name__ == '__main__':
    sys.exit(asyncio.run(main()))
