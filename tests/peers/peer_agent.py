#!/usr/bin/env python3
"""A real A2A peer agent on the official Python SDK (a2a-sdk), for Countersign's watch tests.

Usage:
    python peer_agent.py --port 0 [--log PATH] [--stock-push] [--sdk-check] [-v]

Runs with a2a-sdk 1.x (A2A v1.0, with the SDK's v0.3 compat transports on the same
endpoints) or a2a-sdk 0.3.x (A2A v0.3); it branches on importlib.metadata.version('a2a-sdk').
Binds 127.0.0.1 only. The first stdout line is exactly `listening on http://127.0.0.1:PORT`.

Endpoints (both SDKs): agent card at /.well-known/agent-card.json, JSON-RPC at POST /,
HTTP+JSON at /message:send, /tasks/{id}, ... (v1.0, 1.x only) and /v1/message:send, ... (v0.3).

Behaviour by the first message of a task (case-insensitive first word):
    ask ...   -> input-required "Which environment should I deploy to?"
    auth ...  -> auth-required  "Please sign in at https://example.com/login"
    slow ...  -> working for 2 s, then input-required as for `ask`
    other     -> completed "Done: <text>"
A follow-up on an ask/slow task: data part {"decision":"reject",...} -> rejected
"Rejected: <reason>"; {"decision":"approve",...} -> completed "Approved by a person"; otherwise
completed "Deploying to <text>". On an auth task: completed "Signed in; continuing". A follow-up
with data/file parts also gets an artifact named `echo` holding those parts (before the final
status). Cancel of a non-terminal task -> canceled.

A message whose messageId was already received for the same task (or, for a message without
taskId, that already started a task) is not applied again: the answer is the task as it is.
Every received message is appended to --log as one JSON line (see README.md).

Push notifications are on: the SDK's BasePushNotificationSender with an httpx client, no URL
screening. a2a-sdk 0.3.x's stock sender sends only the token header, so by default it is
subclassed to also send `Authorization: <scheme> <credentials>`; --stock-push keeps the SDK's
sender untouched (no-op on 1.x, whose stock sender already sends Authorization).

--sdk-check builds the app without serving, prints one JSON line describing it, exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import importlib.metadata
import json
import logging
import os
import re
import socket
import sys
import threading

import httpx
import uvicorn

from starlette.applications import Starlette

SDK_VERSION = importlib.metadata.version('a2a-sdk')
SDK_MAJOR = int(SDK_VERSION.split('.')[0])
V1 = SDK_MAJOR >= 1

ASK_PROMPT = 'Which environment should I deploy to?'
AUTH_PROMPT = 'Please sign in at https://example.com/login'
SLOW_SECONDS = 2.0

log = logging.getLogger('peer')


def classify(text: str) -> str:
    m = re.match(r'\s*(ask|auth|slow)\b', text or '', re.IGNORECASE)
    return m.group(1).lower() if m else 'done'


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


class MessageLog:
    """Appends one JSON object per line; thread-safe; no-op without a path."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._lock = threading.Lock()

    def write(self, record: dict) -> None:
        if not self.path:
            return
        line = json.dumps(record, sort_keys=True, default=str) + '\n'
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)


class PeerState:
    """What the peer remembers across requests (in memory, per process)."""

    def __init__(self, msglog: MessageLog) -> None:
        self.msglog = msglog
        self.kinds: dict[str, str] = {}  # task_id -> ask|auth|slow|done
        self.locks: dict[str, asyncio.Lock] = {}
        self.seen: dict[str, set[str]] = {}  # task_id -> messageIds received
        self.started_by: dict[str, asyncio.Future] = {}  # first messageId -> Future[task_id]
        self.logged_first: set[str] = set()

    def lock(self, task_id: str) -> asyncio.Lock:
        return self.locks.setdefault(task_id, asyncio.Lock())


# --------------------------------------------------------------------------------------------
# SDK adapters: the few things that differ between a2a-sdk 1.x (protobuf) and 0.3.x (pydantic).
# --------------------------------------------------------------------------------------------

if V1:
    from google.protobuf.json_format import MessageToDict

    from a2a.helpers import new_task_from_user_message
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.request_handlers import DefaultRequestHandlerV2 as _BaseHandler
    from a2a.server.routes import (
        create_agent_card_routes,
        create_jsonrpc_routes,
        create_rest_routes,
    )
    from a2a.server.tasks import (
        BasePushNotificationSender,
        InMemoryPushNotificationConfigStore,
        InMemoryTaskStore,
        TaskUpdater,
    )
    from a2a.types.a2a_pb2 import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        GetTaskRequest,
        Part,
        TaskState,
    )

    S_INPUT = TaskState.TASK_STATE_INPUT_REQUIRED
    S_AUTH = TaskState.TASK_STATE_AUTH_REQUIRED
    TERMINAL = {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    }

    def text_part(text: str) -> Part:
        return Part(text=text)

    def part_text(part) -> str | None:
        return part.text if part.HasField('text') else None

    def part_data(part):
        return MessageToDict(part.data) if part.HasField('data') else None

    def part_dict(part) -> dict:
        return MessageToDict(part)

    def role_name(msg) -> str:
        from a2a.types.a2a_pb2 import Role

        return Role.Name(msg.role)

    def new_task_event(msg):
        return new_task_from_user_message(msg)

    def interrupted_kwargs() -> dict:
        return {}

    async def get_task_by_id(handler, task_id: str, context):
        return await handler.on_get_task(GetTaskRequest(id=task_id), context)

else:
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.apps import A2AStarletteApplication
    from a2a.server.apps.rest.rest_adapter import RESTAdapter
    from a2a.server.request_handlers import DefaultRequestHandler as _BaseHandler
    from a2a.server.tasks import (
        BasePushNotificationSender,
        InMemoryPushNotificationConfigStore,
        InMemoryTaskStore,
        TaskUpdater,
    )
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        DataPart,
        Part,
        TaskQueryParams,
        TaskState,
        TextPart,
    )
    from a2a.utils import new_task

    S_INPUT = TaskState.input_required
    S_AUTH = TaskState.auth_required
    TERMINAL = {
        TaskState.completed,
        TaskState.canceled,
        TaskState.failed,
        TaskState.rejected,
    }

    def text_part(text: str) -> Part:
        return Part(root=TextPart(text=text))

    def part_text(part) -> str | None:
        return part.root.text if isinstance(part.root, TextPart) else None

    def part_data(part):
        return part.root.data if isinstance(part.root, DataPart) else None

    def part_dict(part) -> dict:
        return part.root.model_dump(mode='json', exclude_none=True, by_alias=True)

    def role_name(msg) -> str:
        return str(msg.role.value if hasattr(msg.role, 'value') else msg.role)

    def new_task_event(msg):
        return new_task(msg)

    def interrupted_kwargs() -> dict:
        # v0.3: an interrupted state ends the stream (`final: true`), as the SDK samples do.
        return {'final': True}

    async def get_task_by_id(handler, task_id: str, context):
        return await handler.on_get_task(TaskQueryParams(id=task_id), context)


def msg_text(msg) -> str:
    return '\n'.join(t for t in (part_text(p) for p in msg.parts) if t is not None)


def msg_datas(msg) -> list:
    return [d for d in (part_data(p) for p in msg.parts) if d is not None]


def log_record(msg, task_id: str | None, context_id: str | None, duplicate: bool, **extra) -> dict:
    rec = {
        'ts': now_iso(),
        'sdk': SDK_VERSION,
        'messageId': msg.message_id,
        'taskId': task_id or msg.task_id or None,
        'contextId': context_id or msg.context_id or None,
        'role': role_name(msg),
        'text': msg_text(msg),
        'data': msg_datas(msg),
        'parts': [part_dict(p) for p in msg.parts],
        'duplicate': duplicate,
    }
    rec.update(extra)
    return rec


# --------------------------------------------------------------------------------------------
# The agent
# --------------------------------------------------------------------------------------------


class PeerExecutor(AgentExecutor):
    def __init__(self, state: PeerState) -> None:
        self.state = state

    async def execute(self, context: RequestContext, event_queue) -> None:
        msg = context.message
        task = context.current_task
        task_id = context.task_id
        # A follow-up without contextId gets a fresh one from the SDK's context builder
        # (a2a-sdk 1.3.0); the task's own contextId is the right one for its events.
        context_id = task.context_id if task is not None else context.context_id
        st = self.state
        async with st.lock(task_id):
            if task is None:
                # A new task: the first message decides its kind.
                if msg.message_id not in st.logged_first:
                    st.logged_first.add(msg.message_id)
                    st.msglog.write(log_record(msg, task_id, context_id, False))
                st.seen.setdefault(task_id, set()).add(msg.message_id)
                text = msg_text(msg)
                kind = classify(text)
                st.kinds[task_id] = kind
                await event_queue.enqueue_event(new_task_event(msg))
                fut = st.started_by.get(msg.message_id)
                if fut is not None and not fut.done():
                    fut.set_result(task_id)
                up = TaskUpdater(event_queue, task_id, context_id)
                if kind == 'slow':
                    await up.start_work()
                    await asyncio.sleep(SLOW_SECONDS)
                    kind = 'ask'
                if kind == 'ask':
                    await up.requires_input(
                        up.new_agent_message([text_part(ASK_PROMPT)]), **interrupted_kwargs()
                    )
                elif kind == 'auth':
                    await up.requires_auth(
                        up.new_agent_message([text_part(AUTH_PROMPT)]), **interrupted_kwargs()
                    )
                else:
                    await up.complete(up.new_agent_message([text_part(f'Done: {text}')]))
                return

            # A follow-up on an existing (non-terminal) task.
            kind = st.kinds.get(task_id)
            if kind is None:
                first = task.history[0] if len(task.history) else msg
                kind = classify(msg_text(first))
            up = TaskUpdater(event_queue, task_id, context_id)
            extra_parts = [p for p in msg.parts if part_text(p) is None]
            if extra_parts:
                await up.add_artifact(extra_parts, name='echo')
            text = msg_text(msg)
            if kind == 'auth':
                await up.complete(up.new_agent_message([text_part('Signed in; continuing')]))
                return
            decision = None
            for d in msg_datas(msg):
                if isinstance(d, dict) and isinstance(d.get('decision'), str):
                    decision = d
                    break
            verdict = (decision or {}).get('decision', '').strip().lower()
            if verdict == 'reject':
                reason = decision.get('reason') or decision.get('comment') or ''
                await up.reject(up.new_agent_message([text_part(f'Rejected: {reason}')]))
            elif verdict == 'approve':
                await up.complete(up.new_agent_message([text_part('Approved by a person')]))
            else:
                await up.complete(up.new_agent_message([text_part(f'Deploying to {text}')]))

    async def cancel(self, context: RequestContext, event_queue) -> None:
        task = context.current_task
        if task is not None and task.status.state in TERMINAL:
            return
        context_id = task.context_id if task is not None else context.context_id
        up = TaskUpdater(event_queue, context.task_id, context_id)
        await up.cancel(up.new_agent_message([text_part('Canceled')]))


class PeerRequestHandler(_BaseHandler):
    """The SDK's default handler plus the message log and messageId de-duplication."""

    def __init__(self, *args, peer_state: PeerState, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.peer_state = peer_state

    async def _duplicate_of(self, msg, context):
        """Returns the task to answer with if `msg` was seen before, else None (and records it)."""
        st = self.peer_state
        if msg.task_id:
            seen = st.seen.setdefault(msg.task_id, set())
            duplicate = msg.message_id in seen
            seen.add(msg.message_id)
            st.msglog.write(log_record(msg, msg.task_id, msg.context_id, duplicate))
            if not duplicate:
                return None
            return await get_task_by_id(self, msg.task_id, context)
        fut = st.started_by.get(msg.message_id)
        if fut is None:
            st.started_by[msg.message_id] = asyncio.get_running_loop().create_future()
            return None
        task_id = await asyncio.wait_for(asyncio.shield(fut), timeout=30)
        st.msglog.write(log_record(msg, task_id, None, True))
        for _ in range(100):  # the task is stored once the SDK consumed its first event
            try:
                return await get_task_by_id(self, task_id, context)
            except Exception:  # noqa: BLE001 - TaskNotFound until then
                await asyncio.sleep(0.05)
        return await get_task_by_id(self, task_id, context)

    def _log_unapplied(self, msg, error: Exception) -> None:
        st = self.peer_state
        if not msg.task_id and msg.message_id not in st.logged_first:
            st.logged_first.add(msg.message_id)
            st.msglog.write(log_record(msg, None, None, False, error=repr(error)))
            fut = st.started_by.pop(msg.message_id, None)
            if fut is not None and not fut.done():
                fut.cancel()

    async def on_message_send(self, params, context=None):
        dup = await self._duplicate_of(params.message, context)
        if dup is not None:
            return dup
        try:
            return await super().on_message_send(params, context)
        except Exception as e:
            self._log_unapplied(params.message, e)
            raise

    async def on_message_send_stream(self, params, context=None):
        dup = await self._duplicate_of(params.message, context)
        if dup is not None:
            yield dup
            return
        try:
            async for event in super().on_message_send_stream(params, context):
                yield event
        except Exception as e:
            self._log_unapplied(params.message, e)
            raise


if not V1:

    class AuthPushSender(BasePushNotificationSender):
        """a2a-sdk 0.3.x's sender, plus `Authorization: <scheme> <credentials>`.

        Same request as the stock `_dispatch_notification` (POST, body = the Task as JSON,
        `X-A2A-Notification-Token` when a token is set); only the Authorization header is added.
        """

        async def _dispatch_notification(self, task, push_info) -> bool:
            url = push_info.url
            try:
                headers = {}
                if push_info.token:
                    headers['X-A2A-Notification-Token'] = push_info.token
                auth = push_info.authentication
                if auth is not None and auth.schemes and auth.credentials:
                    headers['Authorization'] = f'{auth.schemes[0]} {auth.credentials}'
                response = await self._client.post(
                    url,
                    json=task.model_dump(mode='json', exclude_none=True),
                    headers=headers or None,
                )
                response.raise_for_status()
                logging.getLogger('a2a.server.tasks.base_push_notification_sender').info(
                    'Push-notification sent for task_id=%s to URL: %s', task.id, url
                )
            except Exception:
                logging.getLogger('a2a.server.tasks.base_push_notification_sender').exception(
                    'Error sending push-notification for task_id=%s to URL: %s.', task.id, url
                )
                return False
            return True


DESCRIPTION = (
    'Test peer: "ask ..." -> input-required, "auth ..." -> auth-required, '
    '"slow ..." -> working 2 s then input-required, anything else -> completed.'
)


def build_card(base: str):
    if V1:
        interfaces = [
            AgentInterface(url=base, protocol_binding='JSONRPC', protocol_version='1.0'),
            AgentInterface(url=base, protocol_binding='HTTP+JSON', protocol_version='1.0'),
            AgentInterface(url=base, protocol_binding='JSONRPC', protocol_version='0.3'),
            AgentInterface(url=base, protocol_binding='HTTP+JSON', protocol_version='0.3'),
        ]
        return AgentCard(
            name='Peer',
            description=DESCRIPTION,
            version='1.0.0',
            supported_interfaces=interfaces,
            capabilities=AgentCapabilities(streaming=True, push_notifications=True),
            default_input_modes=['text/plain', 'application/json'],
            default_output_modes=['text/plain', 'application/json'],
            skills=[
                AgentSkill(
                    id='deploy',
                    name='Deploy',
                    description=DESCRIPTION,
                    tags=['test'],
                    examples=['ask deploy', 'auth deploy', 'slow deploy', 'hello'],
                )
            ],
        )
    return AgentCard(
        name='Peer',
        description=DESCRIPTION,
        version='1.0.0',
        url=base,
        preferred_transport='JSONRPC',
        protocol_version='0.3.0',
        additional_interfaces=[
            AgentInterface(url=base, transport='JSONRPC'),
            AgentInterface(url=base, transport='HTTP+JSON'),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        default_input_modes=['text/plain', 'application/json'],
        default_output_modes=['text/plain', 'application/json'],
        skills=[
            AgentSkill(
                id='deploy',
                name='Deploy',
                description=DESCRIPTION,
                tags=['test'],
                examples=['ask deploy', 'auth deploy', 'slow deploy', 'hello'],
            )
        ],
    )


def build_app(base: str, msglog: MessageLog, stock_push: bool) -> tuple[Starlette, dict]:
    state = PeerState(msglog)
    card = build_card(base)
    # trust_env=False: never route the pushes through an environment proxy.
    client = httpx.AsyncClient(timeout=10.0, trust_env=False)
    config_store = InMemoryPushNotificationConfigStore()
    if V1 or stock_push:
        sender = BasePushNotificationSender(client, config_store)
    else:
        sender = AuthPushSender(client, config_store)
    handler_kwargs = {
        'agent_executor': PeerExecutor(state),
        'task_store': InMemoryTaskStore(),
        'push_config_store': config_store,
        'push_sender': sender,
    }
    if V1:
        handler_kwargs['agent_card'] = card
    handler = PeerRequestHandler(**handler_kwargs, peer_state=state)

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        try:
            yield
        finally:
            if hasattr(handler, 'aclose'):
                with contextlib.suppress(Exception):
                    await handler.aclose()
            await client.aclose()

    if V1:
        routes = []
        routes += create_agent_card_routes(card)
        routes += create_jsonrpc_routes(handler, '/', enable_v0_3_compat=True)
        routes += create_rest_routes(handler, enable_v0_3_compat=True)
        app = Starlette(routes=routes, lifespan=lifespan)
        protocols = ['1.0 JSONRPC', '1.0 HTTP+JSON', '0.3 JSONRPC (compat)', '0.3 HTTP+JSON (compat)']
        compat = True
    else:
        from starlette.routing import Route

        jsonrpc = A2AStarletteApplication(agent_card=card, http_handler=handler)
        routes = list(jsonrpc.routes())
        rest = RESTAdapter(agent_card=card, http_handler=handler)
        for (path, method), endpoint in rest.routes().items():
            routes.append(Route(path, endpoint, methods=[method]))
        app = Starlette(routes=routes, lifespan=lifespan)
        protocols = ['0.3 JSONRPC', '0.3 HTTP+JSON']
        compat = False
    info = {
        'sdk': SDK_VERSION,
        'protocols': protocols,
        'v0_3_compat': compat,
        'push_sender': type(sender).__name__,
        'routes': sorted({getattr(r, 'path', '?') for r in app.routes}),
    }
    return app, info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--port', type=int, default=0, help='port on 127.0.0.1 (0 = pick a free one)')
    ap.add_argument('--log', metavar='PATH', default=None, help='append every received message as a JSON line')
    ap.add_argument('--stock-push', action='store_true', help="0.3.x: use the SDK's push sender unmodified (no Authorization header)")
    ap.add_argument('--sdk-check', action='store_true', help='build the app, print a JSON summary, exit')
    ap.add_argument('-v', '--verbose', action='store_true', help='SDK and server logs (INFO) on stderr')
    args = ap.parse_args()

    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format='%(asctime)s %(levelname)s %(name)s: %(message)s',
    )

    if args.sdk_check:
        _app, info = build_app('http://127.0.0.1:0', MessageLog(None), args.stock_push)
        print(json.dumps(info, sort_keys=True), flush=True)
        return 0

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(('127.0.0.1', args.port))
    sock.listen(128)
    sock.set_inheritable(True)
    port = sock.getsockname()[1]
    base = f'http://127.0.0.1:{port}'
    app, _info = build_app(base, MessageLog(args.log), args.stock_push)
    config = uvicorn.Config(
        app,
        log_level='info' if args.verbose else 'warning',
        access_log=args.verbose,
        lifespan='on',
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    print(f'listening on {base}', flush=True)
    asyncio.run(server.serve(sockets=[sock]))
    return 0


if __name__ == '__main__':
    sys.exit(main())
