#!/usr/bin/env python3
"""Push notifications from Countersign to a webhook, set up with the official Python A2A SDK.

    python push_flow.py BASE_URL AGENT_ID [--dialect 1.0|0.3] [--transport jsonrpc|http_json]
                        [--timeout SECS] [-v]

A webhook receiver (stdlib http.server, 127.0.0.1:0) records every POST. Then,
through the SDK's own push-config API:
  inline   blocking send `interop-push-*` with a push config in the send
           configuration (URL /hook/inline, token tok-inline-*, Bearer
           cred-inline-*): the task goes working -> input-required
  create   a second config on the existing task with the SDK's create/set call
           (URL /hook/created, token tok-created-*, Bearer cred-created-*)
  read     the SDK reads the configs back (get + list; 0.3.x SDK: get) with the same URLs
  answer   follow-up `interop-answer-*` on the task: completed
  receive  (within 15 s) /hook/inline got submitted, working, input-required,
           completed in that order, /hook/created ended with completed; every
           body parses with the SDK's own types; token headers (and for v1.0
           Authorization, content type, distinct A2A-Notification-Id) are right

Works with whichever a2a-sdk is installed:
  * a2a-sdk 1.x  (.venv-sdk1)  -- v1.0 by default: send configuration
    `task_push_notification_config`, create/get/list_task_push_notification_config(s);
    `--dialect 0.3` uses the SDK's v0.3 compat transports (same client calls,
    sent as `tasks/pushNotificationConfig/set|get|list`).
  * a2a-sdk 0.3.x (.venv-sdk03) -- v0.3: ClientConfig.push_notification_configs
    (sent as MessageSendConfiguration.pushNotificationConfig), set_task_callback /
    get_task_callback.
v1.0 notifications are StreamResponse JSON (parsed with the SDK's protobuf
json_format); v0.3 notifications are the whole Task (parsed with the SDK's
pydantic v0.3 Task model). One PASS/FAIL line per check; exit status 1 if any
check failed, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import threading
import time
import uuid

from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from py_client import (
    BINDINGS,
    SDK_MAJOR,
    SDK_VERSION,
    CheckFailed,
    Runner,
    Sdk03,
    Sdk1,
    expect,
    new_message_id,
    state_name,
)


WAIT_SECS = 15.0
INLINE_STATES = ['submitted', 'working', 'input-required', 'completed']


# --------------------------------------------------------------------------
# webhook receiver
# --------------------------------------------------------------------------


@dataclass
class Hit:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    raw: bytes
    body: Any  # parsed JSON, or None

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), '')


class Receiver:
    """Records each POST (method, path, headers, JSON body) and answers 200."""

    def __init__(self) -> None:
        self.hits: list[Hit] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                raw = self.rfile.read(int(self.headers.get('Content-Length') or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                hit = Hit('POST', self.path, {k.lower(): v for k, v in self.headers.items()}, raw, body)
                with outer.lock:
                    outer.hits.append(hit)
                self.send_response(200)
                self.send_header('Content-Length', '0')
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        host, port = self.server.server_address[:2]
        return f'http://{host}:{port}{path}'

    def at(self, path: str) -> list[Hit]:
        with self.lock:
            return [h for h in self.hits if h.path == path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --------------------------------------------------------------------------
# SDK adapters: push-config calls and notification parsing
# --------------------------------------------------------------------------


class Push1(Sdk1):
    """a2a-sdk 1.x (v1.0, or v0.3 through its compat transports)."""

    def push_config(self, task_id: str, url: str, token: str, cred: str) -> Any:
        from a2a.types.a2a_pb2 import AuthenticationInfo, TaskPushNotificationConfig

        return TaskPushNotificationConfig(
            task_id=task_id, url=url, token=token,
            authentication=AuthenticationInfo(scheme='Bearer', credentials=cred),
        )

    async def send_with_push(self, client: Any, prefix: str, text: str, cfg: Any) -> tuple[Any, str]:
        req, mid = self._request(prefix, text)
        req.configuration.task_push_notification_config.CopyFrom(cfg)
        events = [e async for e in client.send_message(req)]
        expect(len(events) == 1 and events[0].HasField('task'),
               f'blocking send ({mid}) answered {events}, expected one task')
        return self._task(events[0].task), events[0].task.context_id

    async def answer(self, client: Any, task_id: str, context_id: str, prefix: str, text: str) -> Any:
        req, mid = self._request(prefix, text)
        req.message.task_id = task_id
        if context_id:
            req.message.context_id = context_id
        events = [e async for e in client.send_message(req)]
        expect(len(events) == 1 and events[0].HasField('task'),
               f'follow-up ({mid}) answered {events}, expected one task')
        return self._task(events[0].task)

    async def create(self, client: Any, cfg: Any) -> tuple[str, str]:
        """create_task_push_notification_config -> (config id, url)."""
        got = await client.create_task_push_notification_config(cfg)
        return got.id, got.url

    async def read(self, client: Any, task_id: str, config_id: str) -> tuple[str, list[str] | None]:
        """get_task_push_notification_config + list_task_push_notification_configs."""
        from a2a.types.a2a_pb2 import (
            GetTaskPushNotificationConfigRequest,
            ListTaskPushNotificationConfigsRequest,
        )

        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task_id, id=config_id))
        try:
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task_id))
        except NotImplementedError:
            # The SDK's 0.3 REST transport has no list call; get was checked.
            return got.url, None
        return got.url, [c.url for c in listed.configs]

    def parse(self, hit: Hit) -> tuple[str, str]:
        """A notification body -> (task id, 0.3-spelled state), with the SDK's types."""
        if self.dialect == '0.3':
            from a2a.compat.v0_3.types import Task

            t = Task.model_validate_json(hit.raw)
            return t.id, t.status.state.value
        from google.protobuf import json_format

        from a2a.types.a2a_pb2 import StreamResponse, TaskState

        ev = json_format.Parse(hit.raw, StreamResponse())
        which = ev.WhichOneof('payload')
        if which == 'task':
            return ev.task.id, state_name(TaskState.Name(ev.task.status.state))
        if which == 'status_update':
            return ev.status_update.task_id, state_name(TaskState.Name(ev.status_update.status.state))
        if which == 'artifact_update':
            return ev.artifact_update.task_id, ''
        raise CheckFailed(f'notification carries {which!r}, expected task/statusUpdate/artifactUpdate')


class Push03(Sdk03):
    """a2a-sdk 0.3.x (v0.3 only)."""

    dialect = '0.3'

    def push_config(self, task_id: str, url: str, token: str, cred: str) -> Any:
        from a2a.types import PushNotificationAuthenticationInfo, PushNotificationConfig

        return PushNotificationConfig(
            url=url, token=token,
            authentication=PushNotificationAuthenticationInfo(schemes=['Bearer'], credentials=cred),
        )

    def connect(self, card: Any, binding: str, streaming: bool) -> tuple[Any, str]:
        self.card, self.binding = card, binding
        return super().connect(card, binding, streaming)

    async def send_with_push(self, client: Any, prefix: str, text: str, cfg: Any) -> tuple[Any, str]:
        """Sends through a client built with ClientConfig.push_notification_configs=[cfg].

        (A per-call MessageSendConfiguration is merged by the 0.3.x client through
        model_dump()/model_copy(update=...), which leaves the push config a dict: the
        REST transport then fails on it. The ClientConfig route keeps the model.)
        """
        from a2a.client import ClientConfig, ClientFactory
        from a2a.types import Message

        pushing = ClientFactory(ClientConfig(
            streaming=False, httpx_client=self.http, supported_transports=[self.binding],
            push_notification_configs=[cfg],
        )).create(self.card)
        msg, mid = self._message(prefix, text)
        items = [i async for i in pushing.send_message(msg)]
        expect(len(items) == 1 and not isinstance(items[0], Message),
               f'blocking send ({mid}) answered {items}, expected one task')
        task = items[0][0]
        return self._task(task), task.context_id

    async def answer(self, client: Any, task_id: str, context_id: str, prefix: str, text: str) -> Any:
        from a2a.types import Message

        msg, mid = self._message(prefix, text)
        msg.task_id = task_id
        msg.context_id = context_id or None
        items = [i async for i in client.send_message(msg)]
        expect(len(items) == 1 and not isinstance(items[0], Message),
               f'follow-up ({mid}) answered {items}, expected one task')
        return self._task(items[0][0])

    async def create(self, client: Any, cfg: Any) -> tuple[str, str]:
        """set_task_callback -> (config id, url)."""
        got = await client.set_task_callback(cfg)
        return got.push_notification_config.id or '', got.push_notification_config.url

    async def read(self, client: Any, task_id: str, config_id: str) -> tuple[str, list[str] | None]:
        """get_task_callback (the 0.3.x client has no list call)."""
        from a2a.types import GetTaskPushNotificationConfigParams

        got = await client.get_task_callback(GetTaskPushNotificationConfigParams(
            id=task_id, push_notification_config_id=config_id or None))
        return got.push_notification_config.url, None

    def parse(self, hit: Hit) -> tuple[str, str]:
        from a2a.types import Task

        t = Task.model_validate_json(hit.raw)
        return t.id, t.status.state.value


def task_config(sdk: Any, task_id: str, cfg: Any) -> Any:
    """The create/set request: a config bound to a task."""
    if isinstance(sdk, Push03):
        from a2a.types import TaskPushNotificationConfig

        return TaskPushNotificationConfig(task_id=task_id, push_notification_config=cfg)
    return cfg


# --------------------------------------------------------------------------
# checks
# --------------------------------------------------------------------------


def check_headers(hits: list[Hit], v1: bool, token: str, cred: str) -> str:
    ids = []
    for h in hits:
        where = f'POST {h.path} #{hits.index(h) + 1}'
        expect(h.header('x-a2a-notification-token') == token,
               f'{where}: X-A2A-Notification-Token {h.header("x-a2a-notification-token")!r}, expected {token!r}')
        ctype = h.header('content-type').split(';')[0].strip()
        if v1:
            expect(h.header('a2a-notification-token') == token,
                   f'{where}: A2A-Notification-Token {h.header("a2a-notification-token")!r}, expected {token!r}')
            expect(h.header('authorization') == f'Bearer {cred}',
                   f'{where}: Authorization {h.header("authorization")!r}, expected {"Bearer " + cred!r}')
            expect(ctype == 'application/a2a+json', f'{where}: content type {ctype!r}, expected application/a2a+json')
            nid = h.header('a2a-notification-id')
            expect(bool(nid), f'{where}: no A2A-Notification-Id')
            ids.append(nid)
        else:
            expect(ctype == 'application/json', f'{where}: content type {ctype!r}, expected application/json')
    if v1:
        expect(len(set(ids)) == len(ids), f'A2A-Notification-Id repeats across events: {ids}')
        return f'{len(hits)} POSTs: tokens, Authorization: Bearer {cred}, application/a2a+json, distinct notification ids'
    auth = {h.header('authorization') for h in hits} - {''}
    return f'{len(hits)} POSTs: X-A2A-Notification-Token {token}, application/json' + (
        f', Authorization {sorted(auth)}' if auth else '')


async def wait_for(recv: Receiver, sdk: Any, path: str, task_id: str, done: str) -> list[tuple[str, str]]:
    """Waits (≤ WAIT_SECS) until `path` received a notification in state `done`; parses all of them."""
    deadline = time.monotonic() + WAIT_SECS
    while True:
        parsed = [sdk.parse(h) for h in recv.at(path)]
        if any(s == done for _, s in parsed) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.3)  # anything that arrives late is out of order, too
    parsed = [sdk.parse(h) for h in recv.at(path)]
    seq = ' -> '.join(s or 'artifact' for _, s in parsed) or '(nothing)'
    expect(any(s == done for _, s in parsed), f'{path}: no {done} notification within {WAIT_SECS:g}s: {seq}')
    bad = {t for t, _ in parsed} - {task_id}
    expect(not bad, f'{path}: notifications name other tasks {sorted(bad)}')
    return parsed


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('base_url', help='server base URL, e.g. http://127.0.0.1:7717')
    ap.add_argument('agent_id', help='agent id, e.g. interop')
    ap.add_argument('--dialect', choices=['1.0', '0.3'], default='1.0' if SDK_MAJOR >= 1 else '0.3')
    ap.add_argument('--transport', choices=['jsonrpc', 'http_json'], default='jsonrpc')
    ap.add_argument('--timeout', type=float, default=20.0, help='seconds per check (default 20)')
    ap.add_argument('-v', '--verbose', action='store_true', help='print every notification received')
    args = ap.parse_args()
    if SDK_MAJOR < 1 and args.dialect != '0.3':
        ap.error(f'a2a-sdk {SDK_VERSION} speaks only v0.3')
    logging.basicConfig(level=logging.WARNING, format='  %(name)s: %(message)s')

    base = args.base_url.rstrip('/')
    v1 = args.dialect == '1.0'
    tag = f'[a2a-sdk {SDK_VERSION} dialect={args.dialect} {args.transport}]'
    run = Runner(args.timeout)
    recv = Receiver()
    print(f'# push_flow {tag} base={base} agent={args.agent_id} webhook={recv.url("/")}', flush=True)
    nonce = uuid.uuid4().hex[:8]
    inline_path, created_path = '/hook/inline', '/hook/created'
    inline_tok, inline_cred = f'tok-inline-{nonce}', f'cred-inline-{nonce}'
    created_tok, created_cred = f'tok-created-{nonce}', f'cred-created-{nonce}'
    st: dict[str, Any] = {}

    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(args.timeout)) as http:
            if SDK_MAJOR >= 1:
                sdk: Any = Push1(http, 'auto' if v1 else '0.3')
            else:
                sdk = Push03(http, '0.3')

            async def connect() -> str:
                card = await sdk.resolve(f'{base}/a2a/{args.agent_id}')
                st['client'], note = sdk.connect(card, BINDINGS[args.transport], streaming=False)
                return f'{sdk.transport_name(st["client"])}{note}'

            if not await run.check(f'{tag} connect', connect()):
                print(f'# {run.passed} passed, {run.failed} failed', flush=True)
                return 1
            client = st['client']

            async def inline() -> str:
                cfg = sdk.push_config('', recv.url(inline_path), inline_tok, inline_cred)
                t, st['context'] = await sdk.send_with_push(client, 'interop-push', 'interop-push: deploy?', cfg)
                st['task'] = t.id
                expect(t.state == 'input-required', f'task {t.id} is {t.state}, expected input-required')
                return f'task {t.id} input-required ({t.status_text!r}), push config in the send configuration'

            if not await run.check(f'{tag} inline', inline()):
                print(f'# {run.passed} passed, {run.failed} failed', flush=True)
                return 1
            task_id = st['task']

            async def create() -> str:
                cfg = sdk.push_config(task_id, recv.url(created_path), created_tok, created_cred)
                st['config_id'], url = await sdk.create(client, task_config(sdk, task_id, cfg))
                expect(url == recv.url(created_path), f'create answered url {url!r}, expected {recv.url(created_path)!r}')
                return f'config {st["config_id"]!r} on task {task_id} -> {url}'

            created = await run.check(f'{tag} create', create())

            async def read() -> str:
                got, listed = await sdk.read(client, task_id, st.get('config_id', ''))
                expect(got == recv.url(created_path), f'get answered url {got!r}, expected {recv.url(created_path)!r}')
                if listed is None:
                    return f'get -> {got}'
                want = {recv.url(inline_path), recv.url(created_path)}
                expect(want <= set(listed), f'list answered {listed}, expected both {sorted(want)}')
                return f'get -> {got}; list -> {listed}'

            if created:
                await run.check(f'{tag} read', read())
            else:
                run.skip(f'{tag} read', 'no config was created')

            async def answer() -> str:
                t = await sdk.answer(client, task_id, st.get('context', ''), 'interop-answer', 'production')
                expect(t.id == task_id, f'follow-up answered task {t.id}, expected {task_id}')
                expect(t.state == 'completed', f'task {t.id} is {t.state}, expected completed')
                return f'task {t.id} completed ({t.status_text!r})'

            await run.check(f'{tag} answer', answer())

            async def inline_events() -> str:
                parsed = await wait_for(recv, sdk, inline_path, task_id, 'completed')
                states = [s for _, s in parsed if s]
                seq = ' -> '.join(states)
                expect(states == INLINE_STATES, f'{inline_path}: states {seq}, expected {" -> ".join(INLINE_STATES)}')
                hits = recv.at(inline_path)
                if v1:
                    first = hits[0].body or {}
                    expect('task' in first, f'{inline_path}: first notification is {sorted(first)}, expected the task')
                    rest = [sorted(h.body or {}) for h in hits[1:]]
                    expect(all(r in (['statusUpdate'], ['artifactUpdate']) for r in rest),
                           f'{inline_path}: later notifications are {rest}, expected statusUpdate/artifactUpdate')
                else:
                    kinds = {(h.body or {}).get('kind') for h in hits}
                    expect(kinds == {'task'}, f'{inline_path}: bodies of kind {kinds}, expected task')
                return f'{len(hits)} POSTs to {inline_path}: {seq}'

            async def inline_headers() -> str:
                hits = recv.at(inline_path)
                expect(bool(hits), f'nothing arrived at {inline_path}')
                return check_headers(hits, v1, inline_tok, inline_cred)

            async def created_events() -> str:
                parsed = await wait_for(recv, sdk, created_path, task_id, 'completed')
                states = [s for _, s in parsed if s]
                seq = ' -> '.join(states)
                expect(states[-1] == 'completed', f'{created_path}: states {seq}, expected completed last')
                early = [s for s in states if s not in ('input-required', 'completed')]
                expect(not early, f'{created_path}: states from before the config existed: {seq}')
                return f'{len(parsed)} POSTs to {created_path}: {seq}'

            async def created_headers() -> str:
                hits = recv.at(created_path)
                expect(bool(hits), f'nothing arrived at {created_path}')
                return check_headers(hits, v1, created_tok, created_cred)

            await run.check(f'{tag} receive inline', inline_events())
            await run.check(f'{tag} headers inline', inline_headers())
            if created:
                await run.check(f'{tag} receive created', created_events())
                await run.check(f'{tag} headers created', created_headers())
            else:
                run.skip(f'{tag} receive created', 'no config was created')
            if args.verbose:
                for h in recv.hits:
                    print(f'  {h.method} {h.path} {h.headers} {h.raw[:300]!r}', flush=True)
    finally:
        recv.close()

    print(f'# {run.passed} passed, {run.failed} failed', flush=True)
    return 1 if run.failed else 0


if __name__ == '__main__':
    sys.exit(asyncio.run(main()))
