#!/usr/bin/env python3
"""Interop checks for Countersign's pre-0.3 `tasks/send` dialect (plain HTTP, stdlib only).

    python3 legacy_client.py BASE_URL AGENT_ID [--stream] [--no-card] [--timeout S] [-v]

Which dialect this is
---------------------
`tasks/send`, `tasks/sendSubscribe`, `tasks/get`, `tasks/cancel` with client-chosen task
ids, `sessionId` and `type`-tagged parts are the **A2A v0.1.0** wire format (A2A repo tag
`v0.1.0`, docs/specification.md §5.3, §6, §7.1-7.4, §9.1-9.3, and the reference client
samples/python/common/{client/client.py,types.py}). A2A 0.2.0 (tag `v0.2.0`, May 2025)
already renamed them to `message/send`/`message/stream` with `messageId`/`contextId`;
0.2.x differs from 0.3 mostly in the card. So "pre-0.3 legacy tasks/send" == v0.1.

Shapes used (exactly what the v0.1.0 sample A2AClient sends: pydantic model_dump()
*including nulls*; JSON-RPC id = uuid4 hex string; Content-Type: application/json;
no A2A-Version header, no other headers):

  card      GET {BASE}/a2a/{AGENT}/.well-known/agent.json  (v0.1 well-known path; the
            sample resolver appends '/.well-known/agent.json' to the base URL).
            v0.1 AgentCard required: name, url, version, capabilities, skills[{id, name}];
            optional description, provider, documentationUrl, authentication{schemes[]},
            defaultInputModes, defaultOutputModes. Requests go to card.url.
  tasks/send, tasks/sendSubscribe  params = TaskSendParams:
            {"id": "<client task id>", "sessionId": "<client session id>",
             "message": {"role": "user",
                         "parts": [{"type": "text", "text": "...", "metadata": null}],
                         "metadata": null},
             "acceptedOutputModes": null, "pushNotification": null,
             "historyLength": null, "metadata": null}
            result (tasks/send) = Task:
            {"id": <same id>, "sessionId": ..., "status": {"state": "completed"|"input-required"|...,
             "message": {"role": "agent", "parts": [{"type": "text", "text": ...}]},
             "timestamp": "<ISO 8601>"},
             "artifacts": [{"name"?, "parts": [...], "index": 0, "append"?, "lastChunk"?}],
             "history"?: [...], "metadata"?: {...}}
            tasks/sendSubscribe answers text/event-stream; each `data:` is a JSON-RPC response
            whose result is TaskStatusUpdateEvent {"id", "status", "final"} or
            TaskArtifactUpdateEvent {"id", "artifact"}; the server closes after final:true.
  tasks/get      params = TaskQueryParams {"id", "historyLength": null, "metadata": null} -> Task
  tasks/cancel   params = TaskIdParams {"id", "metadata": null} -> Task (state "canceled")
  states    submitted, working, input-required, completed, canceled, failed, unknown
  errors    -32001 TaskNotFound, -32002 TaskNotCancelable, -32601 method not found, ...

The v0.1 Message has no messageId, so tests/interop/interop-agent.toml matches these
requests on the text marker at the start of the first part (interop-complete,
interop-stream, interop-input).

Checks: card, complete, stream (only with --stream: tasks/sendSubscribe), cancel.
One line per check; exit status 1 if any check failed, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
import uuid

from typing import Any


ARTIFACT_TEXT = 'interop artifact'
STREAM_ARTIFACT_TEXT = 'interop streamed artifact'
V01_STATES = {'submitted', 'working', 'input-required', 'completed', 'canceled', 'failed', 'unknown'}
TERMINAL = {'completed', 'canceled', 'failed'}

VERBOSE = False


class CheckFailed(Exception):
    pass


def expect(cond: bool, msg: str) -> None:
    if not cond:
        raise CheckFailed(msg)


def log(msg: str) -> None:
    if VERBOSE:
        print(f'  {msg}', flush=True)


def http(method: str, url: str, body: Any = None, timeout: float = 20, stream: bool = False) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header('Content-Type', 'application/json')
    log(f'> {method} {url} {data.decode()[:400] if data else ""}')
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)  # noqa: S310 - URL from the command line
    except urllib.error.HTTPError as e:
        text = e.read().decode('utf-8', 'replace')
        log(f'< {e.code} {e.headers.get("content-type")} {text[:400]}')
        raise CheckFailed(f'{method} {url}: HTTP {e.code} {text[:300]}') from None
    except urllib.error.URLError as e:
        raise CheckFailed(f'{method} {url}: {e.reason}') from None
    ctype = resp.headers.get('content-type') or ''
    if stream:
        log(f'< {resp.status} {ctype} (stream)')
        return resp
    text = resp.read().decode('utf-8', 'replace')
    log(f'< {resp.status} {ctype} {text[:400]}')
    try:
        return json.loads(text)
    except ValueError:
        raise CheckFailed(f'{method} {url}: HTTP {resp.status} {ctype}, body is not JSON: {text[:200]!r}') from None


def rpc_request(method: str, params: dict[str, Any]) -> dict[str, Any]:
    # same envelope as the v0.1.0 sample JSONRPCRequest: id = uuid4().hex
    return {'jsonrpc': '2.0', 'id': uuid.uuid4().hex, 'method': method, 'params': params}


def rpc(endpoint: str, method: str, params: dict[str, Any], timeout: float) -> Any:
    req = rpc_request(method, params)
    resp = http('POST', endpoint, req, timeout)
    expect(isinstance(resp, dict), f'{method}: answer is not a JSON object: {resp!r}')
    expect(resp.get('jsonrpc') == '2.0', f'{method}: answer lacks "jsonrpc": "2.0": {resp}')
    expect(resp.get('id') == req['id'], f'{method}: answer id {resp.get("id")!r} != request id {req["id"]!r}')
    if resp.get('error') is not None:
        err = resp['error']
        raise CheckFailed(f'{method} -> JSON-RPC error {err.get("code")}: {err.get("message")} {json.dumps(err.get("data"))[:200] if err.get("data") else ""}')
    expect('result' in resp, f'{method}: answer has neither result nor error: {resp}')
    return resp['result']


def text_message(text: str) -> dict[str, Any]:
    return {'role': 'user', 'parts': [{'type': 'text', 'text': text, 'metadata': None}], 'metadata': None}


def send_params(task_id: str, session_id: str, text: str) -> dict[str, Any]:
    return {
        'id': task_id,
        'sessionId': session_id,
        'message': text_message(text),
        'acceptedOutputModes': None,
        'pushNotification': None,
        'historyLength': None,
        'metadata': None,
    }


def parts_texts(parts: Any, where: str) -> list[str]:
    expect(isinstance(parts, list) and parts, f'{where}: parts must be a non-empty list, got {parts!r}')
    out = []
    for p in parts:
        expect(isinstance(p, dict), f'{where}: part is not an object: {p!r}')
        expect('type' in p, f'{where}: part lacks the v0.1 "type" discriminator (got keys {sorted(p)}): {p}')
        expect(p['type'] in ('text', 'file', 'data'), f'{where}: part type {p["type"]!r} is not text/file/data')
        if p['type'] == 'text':
            expect(isinstance(p.get('text'), str), f'{where}: text part without a text string: {p}')
            out.append(p['text'])
    return out


def check_status(status: Any, where: str) -> str:
    expect(isinstance(status, dict), f'{where}: status is not an object: {status!r}')
    state = status.get('state')
    expect(state in V01_STATES, f'{where}: state {state!r} is not a v0.1 TaskState {sorted(V01_STATES)}')
    msg = status.get('message')
    if msg is not None:
        expect(msg.get('role') == 'agent', f'{where}: status message role {msg.get("role")!r}, expected "agent"')
        parts_texts(msg.get('parts'), f'{where} status message')
    ts = status.get('timestamp')
    expect(ts is None or isinstance(ts, str), f'{where}: timestamp {ts!r} is not an ISO string')
    return state


def check_task(task: Any, task_id: str, session_id: str | None, where: str) -> tuple[str, list[str]]:
    """Validates a v0.1 Task; returns (state, artifact texts)."""
    expect(isinstance(task, dict), f'{where}: result is not a Task object: {task!r}')
    expect(task.get('id') == task_id, f'{where}: Task.id {task.get("id")!r}, expected the client-chosen id {task_id!r} (v0.1 §6.1: the server MUST use it)')
    if session_id is not None and task.get('sessionId') is not None:
        expect(task['sessionId'] == session_id, f'{where}: sessionId {task["sessionId"]!r}, expected {session_id!r}')
    for k in ('kind', 'contextId'):
        expect(k not in task, f'{where}: Task carries the 0.2+/0.3 field {k!r}; v0.1 clients do not know it: {json.dumps(task)[:300]}')
    state = check_status(task.get('status'), where)
    texts: list[str] = []
    for i, a in enumerate(task.get('artifacts') or []):
        texts += parts_texts(a.get('parts'), f'{where} artifact[{i}]')
    return state, texts


def sse_events(resp: Any) -> list[dict[str, Any]]:
    events, data = [], []
    for raw in resp:
        line = raw.decode('utf-8').rstrip('\r\n')
        if line == '':
            if data:
                events.append(json.loads('\n'.join(data)))
                log(f'< event {events[-1]}')
                data = []
            continue
        if line.startswith('data:'):
            data.append(line[5:].lstrip(' '))
    if data:
        events.append(json.loads('\n'.join(data)))
    return events


def main() -> int:
    global VERBOSE  # noqa: PLW0603
    ap = argparse.ArgumentParser(description='pre-0.3 (A2A v0.1.0) tasks/send interop checks')
    ap.add_argument('base_url')
    ap.add_argument('agent_id')
    ap.add_argument('--stream', action='store_true', help='also check tasks/sendSubscribe (SSE)')
    ap.add_argument('--no-card', action='store_true', help='skip the agent.json check; POST to BASE/a2a/AGENT')
    ap.add_argument('--timeout', type=float, default=20.0)
    ap.add_argument('-v', '--verbose', action='store_true')
    args = ap.parse_args()
    VERBOSE = args.verbose

    base = args.base_url.rstrip('/')
    agent_base = f'{base}/a2a/{args.agent_id}'
    endpoint = agent_base
    tag = '[pre-0.3 tasks/send]'
    passed = failed = 0

    def run(name: str, fn: Any) -> Any:
        nonlocal passed, failed
        try:
            detail = fn()
        except CheckFailed as e:
            failed += 1
            print(f'FAIL {tag} {name}: {e}', flush=True)
            return None
        except Exception as e:  # noqa: BLE001
            failed += 1
            print(f'FAIL {tag} {name}: {type(e).__name__}: {e}', flush=True)
            return None
        passed += 1
        print(f'PASS {tag} {name}: {detail}', flush=True)
        return detail

    print(f'# legacy_client {tag} base={base} agent={args.agent_id}', flush=True)

    if not args.no_card:
        def card() -> str:
            nonlocal endpoint
            url = f'{agent_base}/.well-known/agent.json'
            c = http('GET', url, timeout=args.timeout)
            expect(isinstance(c, dict), f'{url}: not a JSON object')
            missing = [k for k in ('name', 'url', 'version', 'capabilities', 'skills') if k not in c]
            expect(not missing, f'{url}: v0.1 AgentCard lacks required {missing}')
            expect(isinstance(c['skills'], list), f'{url}: skills is not a list')
            for s in c['skills']:
                expect('id' in s and 'name' in s, f'{url}: skill without id/name: {s}')
            expect(isinstance(c['capabilities'], dict), f'{url}: capabilities is not an object')
            endpoint = c['url']
            return f'{url} -> url={c["url"]} streaming={c["capabilities"].get("streaming")}'

        run('card', card)
    print(f'# JSON-RPC endpoint {endpoint}', flush=True)

    session = uuid.uuid4().hex

    def complete() -> str:
        tid = f'interop-legacy-{uuid.uuid4().hex[:12]}'
        task = rpc(endpoint, 'tasks/send', send_params(tid, session, 'interop-complete: please finish'), args.timeout)
        state, texts = check_task(task, tid, session, 'tasks/send')
        expect(state == 'completed', f'task {tid} is {state}, expected completed')
        expect(ARTIFACT_TEXT in texts, f'task {tid} artifacts {texts}, expected {ARTIFACT_TEXT!r}')
        return f'task {tid} completed, artifacts {texts}'

    run('complete', complete)

    if args.stream:
        def stream() -> str:
            tid = f'interop-legacy-{uuid.uuid4().hex[:12]}'
            req = rpc_request('tasks/sendSubscribe', send_params(tid, session, 'interop-stream: please stream'))
            resp = http('POST', endpoint, req, args.timeout, stream=True)
            ctype = resp.headers.get('content-type') or ''
            if 'text/event-stream' not in ctype:
                body = resp.read().decode('utf-8', 'replace')
                raise CheckFailed(f'tasks/sendSubscribe answered {ctype!r}, expected text/event-stream: {body[:300]}')
            t0 = time.monotonic()
            events = sse_events(resp)
            seq = []
            for ev in events:
                expect(ev.get('id') == req['id'], f'event id {ev.get("id")!r} != request id {req["id"]!r}')
                if ev.get('error') is not None:
                    raise CheckFailed(f'stream error event: {ev["error"]}')
                r = ev.get('result')
                expect(isinstance(r, dict) and r.get('id') == tid, f'event result.id must be the task id {tid!r}: {ev}')
                if 'status' in r:
                    st = check_status(r['status'], 'status event')
                    seq.append(('status', st, bool(r.get('final'))))
                elif 'artifact' in r:
                    seq.append(('artifact', ' '.join(parts_texts(r['artifact'].get('parts'), 'artifact event')), False))
                else:
                    raise CheckFailed(f'event is neither TaskStatusUpdateEvent nor TaskArtifactUpdateEvent: {r}')
            shown = ' -> '.join(f'{k}({v}{", final" if f else ""})' for k, v, f in seq)
            expect(seq, 'stream ended without events')
            kinds = [k for k, _, _ in seq]
            i_work = next((i for i, (k, v, _) in enumerate(seq) if k == 'status' and v == 'working'), None)
            i_art = kinds.index('artifact') if 'artifact' in kinds else None
            i_done = next((i for i, (k, v, _) in enumerate(seq) if k == 'status' and v == 'completed'), None)
            expect(None not in (i_work, i_art, i_done) and i_work < i_art < i_done, f'want working < artifact < completed: {shown}')
            expect(i_done == len(seq) - 1, f'events after completed: {shown}')
            expect(seq[i_done][2], f'completed status lacks final=true: {shown}')
            expect(seq[i_art][1] == STREAM_ARTIFACT_TEXT, f'artifact text {seq[i_art][1]!r}: {shown}')
            task = rpc(endpoint, 'tasks/get', {'id': tid, 'historyLength': None, 'metadata': None}, args.timeout)
            state, _ = check_task(task, tid, session, 'tasks/get after stream')
            expect(state == 'completed', f'tasks/get after the stream: {state}')
            return f'{shown} ({time.monotonic() - t0:.2f}s)'

        run('stream', stream)

    def cancel() -> str:
        tid = f'interop-legacy-{uuid.uuid4().hex[:12]}'
        task = rpc(endpoint, 'tasks/send', send_params(tid, session, 'interop-input: ask me'), args.timeout)
        state, _ = check_task(task, tid, session, 'tasks/send')
        expect(state == 'input-required', f'task {tid} is {state}, expected input-required')
        got = rpc(endpoint, 'tasks/get', {'id': tid, 'historyLength': None, 'metadata': None}, args.timeout)
        state, _ = check_task(got, tid, session, 'tasks/get')
        expect(state == 'input-required', f'tasks/get {tid}: {state}, expected input-required')
        c = rpc(endpoint, 'tasks/cancel', {'id': tid, 'metadata': None}, args.timeout)
        state, _ = check_task(c, tid, session, 'tasks/cancel')
        expect(state == 'canceled', f'tasks/cancel {tid}: {state}, expected canceled')
        got = rpc(endpoint, 'tasks/get', {'id': tid, 'historyLength': 10, 'metadata': None}, args.timeout)
        state, _ = check_task(got, tid, session, 'tasks/get after cancel')
        expect(state == 'canceled', f'tasks/get {tid} after cancel: {state}, expected canceled')
        return f'task {tid}: input-required -> get input-required -> cancel canceled -> get canceled'

    run('cancel', cancel)

    def not_found() -> str:
        tid = f'interop-legacy-missing-{uuid.uuid4().hex[:8]}'
        req = rpc_request('tasks/get', {'id': tid, 'historyLength': None, 'metadata': None})
        resp = http('POST', endpoint, req, args.timeout)
        err = resp.get('error') if isinstance(resp, dict) else None
        expect(err is not None, f'tasks/get of an unknown id answered {resp}')
        expect(err.get('code') == -32001, f'tasks/get of an unknown id: error {err.get("code")}, expected -32001 TaskNotFound')
        return f'unknown task -> -32001 {err.get("message")!r}'

    run('not-found', not_found)

    print(f'# {passed} passed, {failed} failed', flush=True)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
