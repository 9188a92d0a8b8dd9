"""A peer agent built on FastA2A (the `fasta2a` package): an A2A 1.0
JSON-RPC server that offers no push notifications and starts a new task for
every message, carrying a conversation in its context instead.

- "ask ...": the task asks "Which colour, red or blue?" (input-required);
- any message in a context whose question is open: that task completes with
  "Got your answer: <text>" and an artifact `answer=<text>`;
- anything else completes with "echo: <text>" and the text as an artifact.

Prints `listening on http://127.0.0.1:PORT` once it serves; `--log FILE`
appends one JSON line per message received.

    python fasta2a_peer.py [--port 0] [--log FILE]
"""

import argparse
import json
import socket
import uuid
from contextlib import asynccontextmanager

import uvicorn
from fasta2a import FastA2A, Worker
from fasta2a.broker import InMemoryBroker
from fasta2a.storage import InMemoryStorage


def text_of(message):
    return " ".join(p["text"] for p in message.get("parts", []) if "text" in p)


def agent_message(text):
    return {"role": "agent", "parts": [{"text": text}], "message_id": str(uuid.uuid4())}


class ColourWorker(Worker):
    """The agent: a question, an answer, or an echo (see the module's notes)."""

    log_path = None

    async def run_task(self, params):
        message = params["message"]
        if self.log_path:
            with open(self.log_path, "a") as f:
                f.write(json.dumps({"task_id": params["id"], "message": message}) + "\n")
        text = text_of(message)
        task_id, context_id = params["id"], params["context_id"]
        question_open = await self.storage.load_context(context_id)
        await self.storage.update_task(task_id, state="working")
        if text.startswith("ask"):
            await self.storage.update_context(context_id, task_id)
            await self.storage.update_task(
                task_id,
                state="input-required",
                new_messages=[agent_message("Which colour, red or blue?")],
            )
        elif question_open:
            await self.storage.update_context(context_id, None)
            await self.storage.update_task(
                task_id,
                state="completed",
                new_messages=[agent_message(f"Got your answer: {text}")],
                new_artifacts=[
                    {"artifact_id": str(uuid.uuid4()), "name": "answer", "parts": [{"text": f"answer={text}"}]}
                ],
            )
        else:
            await self.storage.update_task(
                task_id,
                state="completed",
                new_messages=[agent_message(f"echo: {text}")],
                new_artifacts=[{"artifact_id": str(uuid.uuid4()), "name": "echo", "parts": [{"text": text}]}],
            )

    async def cancel_task(self, params):
        await self.storage.update_task(params["id"], state="canceled")

    def build_message_history(self, history):
        return history

    def build_artifacts(self, result):
        return []


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log")
    args = parser.parse_args()
    port = args.port
    if port == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    storage, broker = InMemoryStorage(), InMemoryBroker()
    worker = ColourWorker(broker=broker, storage=storage)
    worker.log_path = args.log

    @asynccontextmanager
    async def lifespan(app):
        async with app.task_manager:
            async with worker.run():
                print(f"listening on http://127.0.0.1:{port}", flush=True)
                yield

    app = FastA2A(
        storage=storage,
        broker=broker,
        name="Colour bot (FastA2A)",
        url=f"http://127.0.0.1:{port}",
        lifespan=lifespan,
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
