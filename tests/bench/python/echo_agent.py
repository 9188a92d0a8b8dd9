#!/usr/bin/env python3
"""Echo agent on the official Python SDK (a2a-sdk 1.x), a peer in tests/bench/run.sh.

Usage: python echo_agent.py PORT [--sqlite PATH]

Every message gets a completed task whose status message repeats the text. The task store is
the SDK's InMemoryTaskStore, or with --sqlite its DatabaseTaskStore on a SQLite file (aiosqlite).
Card at /.well-known/agent-card.json, JSON-RPC (A2A 1.0) at POST /. Binds 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import logging

import uvicorn
from starlette.applications import Starlette

from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part


class Echo(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue) -> None:
        msg = context.message
        text = ''.join(p.text for p in msg.parts if p.HasField('text'))
        if context.current_task is None:
            await event_queue.enqueue_event(new_task_from_user_message(msg))
        up = TaskUpdater(event_queue, context.task_id, context.context_id)
        await up.complete(up.new_agent_message([Part(text=text)]))

    async def cancel(self, context: RequestContext, event_queue) -> None:
        up = TaskUpdater(event_queue, context.task_id, context.context_id)
        await up.cancel()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument('port', type=int)
    ap.add_argument('--sqlite', metavar='PATH')
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    base = f'http://127.0.0.1:{args.port}/'
    card = AgentCard(
        name='Echo',
        description='Echoes the text',
        version='1.0.0',
        supported_interfaces=[
            AgentInterface(url=base, protocol_binding='JSONRPC', protocol_version='1.0')
        ],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=['text/plain'],
        default_output_modes=['text/plain'],
        skills=[AgentSkill(id='echo', name='Echo', description='Repeats the text', tags=['echo'])],
    )
    if args.sqlite:
        from sqlalchemy.ext.asyncio import create_async_engine

        from a2a.server.tasks import DatabaseTaskStore

        engine = create_async_engine(f'sqlite+aiosqlite:///{args.sqlite}')
        store = DatabaseTaskStore(engine)
    else:
        store = InMemoryTaskStore()
    handler = DefaultRequestHandlerV2(agent_executor=Echo(), task_store=store, agent_card=card)
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, '/')
    app = Starlette(routes=routes)
    uvicorn.run(app, host='127.0.0.1', port=args.port, log_level='warning', access_log=False)


if __name__ == '__main__':
    main()
