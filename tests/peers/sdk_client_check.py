#!/usr/bin/env python3
"""The official SDK *client* of this venv against a running peer_agent.py.

    python sdk_client_check.py BASE_URL --name NAME [--dialect auto|0.3]

a2a-sdk 1.x: `auto` lets ClientFactory pick from the card (v1.0 against a 1.x peer, the v0.3
compat transports against a 0.3 peer); `0.3` forces the compat transports (keeps only the
card's v0.3 interfaces). a2a-sdk 0.3.x: always v0.3. For JSON-RPC and HTTP+JSON each:
"hello" -> completed "Done: hello"; "ask deploy" -> input-required, then a follow-up on the
same taskId/contextId -> completed "Deploying to prod". One PASS/FAIL line per check.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import sys
import uuid

import httpx

SDK_VERSION = importlib.metadata.version('a2a-sdk')
V1 = int(SDK_VERSION.split('.')[0]) >= 1
BINDINGS = ['JSONRPC', 'HTTP+JSON']


async def run_sdk1(base: str, dialect: str, say) -> None:
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.types.a2a_pb2 import AgentCard, Message, Part, Role, SendMessageRequest, TaskState

    async with httpx.AsyncClient(timeout=15, trust_env=False) as http:
        ClientFactory(ClientConfig(httpx_client=http))  # sets A2A-Version on the shared client
        card = await A2ACardResolver(http, base).get_agent_card()
        for binding in BINDINGS:
            c = AgentCard()
            c.CopyFrom(card)
            if dialect == '0.3':
                keep = [i for i in c.supported_interfaces
                        if i.protocol_binding == binding and i.protocol_version.startswith('0.')]
                del c.supported_interfaces[:]
                c.supported_interfaces.extend(keep)
            try:
                client = ClientFactory(ClientConfig(streaming=False, httpx_client=http,
                                                    supported_protocol_bindings=[binding])).create(c)
            except Exception as e:  # noqa: BLE001
                say(f'{binding}: connect', False, repr(e))
                continue
            t = type(getattr(client._transport, '_base', None) or client._transport).__name__  # noqa: SLF001

            async def send(text, task_id='', context_id=''):
                msg = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)],
                              task_id=task_id, context_id=context_id)
                evs = [e async for e in client.send_message(SendMessageRequest(message=msg))]
                task = evs[-1].task
                st = TaskState.Name(task.status.state)
                return task, st, ' '.join(p.text for p in task.status.message.parts if p.HasField('text'))

            try:
                _, st, txt = await send('hello')
                say(f'{binding} via {t}: hello -> completed "Done: hello"',
                    st == 'TASK_STATE_COMPLETED' and txt == 'Done: hello', f'{st} {txt!r}')
                task, st, txt = await send('ask deploy')
                say(f'{binding} via {t}: ask -> input-required', st == 'TASK_STATE_INPUT_REQUIRED', st)
                _, st, txt = await send('prod', task.id, task.context_id)
                say(f'{binding} via {t}: follow-up -> completed "Deploying to prod"',
                    st == 'TASK_STATE_COMPLETED' and txt == 'Deploying to prod', f'{st} {txt!r}')
            except Exception as e:  # noqa: BLE001
                say(f'{binding} via {t}: flow', False, repr(e))


async def run_sdk03(base: str, say) -> None:
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.types import Message, Part, Role, TextPart

    async with httpx.AsyncClient(timeout=15, trust_env=False) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        for binding in BINDINGS:
            try:
                client = ClientFactory(ClientConfig(streaming=False, httpx_client=http,
                                                    supported_transports=[binding])).create(card)
            except Exception as e:  # noqa: BLE001
                say(f'{binding}: connect', False, repr(e))
                continue
            t = type(client._transport).__name__  # noqa: SLF001

            async def send(text, task_id=None, context_id=None):
                msg = Message(message_id=uuid.uuid4().hex, role=Role.user,
                              parts=[Part(root=TextPart(text=text))], task_id=task_id, context_id=context_id)
                items = [i async for i in client.send_message(msg)]
                task = items[-1][0]
                m = task.status.message
                txt = ' '.join(p.root.text for p in (m.parts if m else []) if isinstance(p.root, TextPart))
                return task, task.status.state.value, txt

            try:
                _, st, txt = await send('hello')
                say(f'{binding} via {t}: hello -> completed "Done: hello"',
                    st == 'completed' and txt == 'Done: hello', f'{st} {txt!r}')
                task, st, txt = await send('ask deploy')
                say(f'{binding} via {t}: ask -> input-required', st == 'input-required', st)
                _, st, txt = await send('prod', task.id, task.context_id)
                say(f'{binding} via {t}: follow-up -> completed "Deploying to prod"',
                    st == 'completed' and txt == 'Deploying to prod', f'{st} {txt!r}')
            except Exception as e:  # noqa: BLE001
                say(f'{binding} via {t}: flow', False, repr(e))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('base')
    ap.add_argument('--name', required=True)
    ap.add_argument('--dialect', choices=['auto', '0.3'], default='auto')
    args = ap.parse_args()
    counts = {'passed': 0, 'failed': 0}

    def say(what: str, ok: bool, detail: str = '') -> None:
        counts['passed' if ok else 'failed'] += 1
        print(f'{"PASS" if ok else "FAIL"} {args.name}: {what}' + ('' if ok or not detail else f': {detail}'),
              flush=True)

    try:
        if V1:
            asyncio.run(asyncio.wait_for(run_sdk1(args.base, args.dialect, say), 60))
        else:
            asyncio.run(asyncio.wait_for(run_sdk03(args.base, say), 60))
    except Exception as e:  # noqa: BLE001
        say('client run', False, repr(e))
    print(f'{args.name}: {counts["passed"]} passed, {counts["failed"]} failed', flush=True)
    return 1 if counts['failed'] else 0


if __name__ == '__main__':
    sys.exit(main())
