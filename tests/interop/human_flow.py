"""A real A2A client (the official a2a-sdk 1.x) hands work to a person.

usage: python human_flow.py BASE_URL --wait blocking|stream|poll --expect STATE [--expect-text TEXT]

It discovers the `inbox` agent (a `human` agent) from BASE_URL/a2a/inbox,
sends a message, and checks the blocking send comes back parked
(input-required). It prints `TASK <id>` on its own line so the caller can
decide on the task (with the `countersign` CLI), then waits for the outcome:
  stream   - SubscribeToTask, until the stream ends with a terminal state
  poll     - GetTask every 100 ms
  blocking - a follow-up blocking SendMessage is not how one waits for a
             person, so this mode just polls after printing, like `poll`, but
             through a fresh client (a caller that reconnects later)
It exits 0 when the final state is STATE and (if given) the status message
contains TEXT; 1 otherwise, saying why. Everything is bounded by 60 s.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid

import httpx


async def connect(http: httpx.AsyncClient, base: str, streaming: bool):
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory

    ClientFactory(ClientConfig(httpx_client=http))  # puts A2A-Version: 1.0 on the client
    card = await A2ACardResolver(http, f"{base}/a2a/inbox").get_agent_card()
    config = ClientConfig(streaming=streaming, httpx_client=http, supported_protocol_bindings=["JSONRPC"])
    return ClientFactory(config).create(card)


def state_of(task) -> str:
    from a2a.types.a2a_pb2 import TaskState

    return TaskState.Name(task.status.state)


def status_text(task) -> str:
    return " ".join(p.text for p in task.status.message.parts if p.HasField("text"))


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("--wait", choices=["blocking", "stream", "poll"], required=True)
    ap.add_argument("--expect", required=True, help="e.g. TASK_STATE_COMPLETED")
    ap.add_argument("--expect-text", default="")
    args = ap.parse_args()
    from a2a.types.a2a_pb2 import GetTaskRequest, Message, Part, Role, SendMessageRequest, SubscribeToTaskRequest

    async with httpx.AsyncClient(timeout=60) as http:
        client = await connect(http, args.base, streaming=False)
        msg = Message(message_id=f"human-flow-{uuid.uuid4().hex[:8]}", role=Role.ROLE_USER,
                      parts=[Part(text=f"May I proceed? ({args.wait})")])
        events = [e async for e in client.send_message(SendMessageRequest(message=msg))]
        if len(events) != 1 or not events[0].HasField("task"):
            print(f"FAIL blocking send answered {events}", file=sys.stderr)
            return 1
        task = events[0].task
        if state_of(task) != "TASK_STATE_INPUT_REQUIRED":
            print(f"FAIL blocking send returned {state_of(task)}, expected TASK_STATE_INPUT_REQUIRED", file=sys.stderr)
            return 1
        final = None
        if args.wait == "stream":
            stream_client = await connect(http, args.base, streaming=True)
            sub = stream_client.subscribe(SubscribeToTaskRequest(id=task.id))
            first = await sub.__anext__()
            print(f"TASK {task.id}", flush=True)  # subscribed: now the person may decide
            last_state = None
            if first.HasField("task"):
                last_state = state_of(first.task)
            async for ev in sub:
                if ev.HasField("status_update"):
                    from a2a.types.a2a_pb2 import TaskState

                    last_state = TaskState.Name(ev.status_update.status.state)
            final = await client.get_task(GetTaskRequest(id=task.id))
            if last_state != state_of(final):
                print(f"FAIL the stream ended at {last_state}, the task is {state_of(final)}", file=sys.stderr)
                return 1
        else:
            print(f"TASK {task.id}", flush=True)
            poller = client if args.wait == "poll" else await connect(http, args.base, streaming=False)
            for _ in range(600):
                t = await poller.get_task(GetTaskRequest(id=task.id))
                if state_of(t) != "TASK_STATE_INPUT_REQUIRED":
                    final = t
                    break
                await asyncio.sleep(0.1)
        if final is None:
            print("FAIL the task was never decided", file=sys.stderr)
            return 1
        if state_of(final) != args.expect or args.expect_text not in status_text(final):
            print(f"FAIL final {state_of(final)} {status_text(final)!r}, expected {args.expect} {args.expect_text!r}", file=sys.stderr)
            return 1
        print(f"PASS [{args.wait}] {state_of(final)}: {status_text(final)}")
        return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(asyncio.wait_for(main(), 60)))
