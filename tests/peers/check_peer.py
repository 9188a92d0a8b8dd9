#!/usr/bin/env python3
"""Client-side check of peer_agent.py, and a record of what its SDK sends on push.

Usage (normally through check_peer.sh):
    python check_peer.py --peer-python PY [--peer-arg ARG]... --dialect v1-jsonrpc|v1-rest|v03-jsonrpc
                         --name NAME [--expect-auth yes|no] [--report PATH] [-v]

Starts `PY peer_agent.py --port 0 --log TMP`, a webhook receiver (http.server on 127.0.0.1:0),
and runs the flows below as plain HTTP (httpx), printing one PASS/FAIL line per check and a
summary line `N passed, N failed`. Exit status 1 if anything failed. Everything binds 127.0.0.1.
--report appends one JSON object per variant with the observed push wire details.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import httpx

HERE = os.path.dirname(os.path.abspath(__file__))
ASK_PROMPT = 'Which environment should I deploy to?'
AUTH_PROMPT = 'Please sign in at https://example.com/login'
TOKEN = 't0k3n'
CREDS = 'c0ffee'
TOKEN_HEADERS = ('x-a2a-notification-token', 'a2a-notification-token')


# ------------------------------------------------------------------------------------------
# Webhook receiver
# ------------------------------------------------------------------------------------------


class Receiver:
    def __init__(self) -> None:
        self.posts: list[dict] = []
        self.cond = threading.Condition()
        recv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'

            def do_POST(self):  # noqa: N802
                n = int(self.headers.get('content-length') or 0)
                raw = self.rfile.read(n)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                rec = {
                    't': time.monotonic(),
                    'method': 'POST',
                    'path': self.path,
                    'headers': [(k, v) for k, v in self.headers.items()],
                    'raw': raw.decode('utf-8', 'replace'),
                    'body': body,
                }
                with recv.cond:
                    recv.posts.append(rec)
                    recv.cond.notify_all()
                self.send_response(503 if self.path.startswith('/webhooks/fail') else 200)
                self.send_header('content-length', '0')
                self.end_headers()

            def do_GET(self):  # noqa: N802 - validation probes, if any
                with recv.cond:
                    recv.posts.append({'t': time.monotonic(), 'method': 'GET', 'path': self.path,
                                       'headers': list(self.headers.items()), 'raw': '', 'body': None})
                    recv.cond.notify_all()
                self.send_response(200)
                self.send_header('content-length', '0')
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, sub: str) -> str:
        return f'http://127.0.0.1:{self.port}/webhooks/{sub}'

    def for_sub(self, sub: str) -> list[dict]:
        with self.cond:
            return [p for p in self.posts if p['path'] == f'/webhooks/{sub}']

    def wait(self, sub: str, pred, timeout: float = 6.0) -> dict | None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for p in self.posts:
                    if p['path'] == f'/webhooks/{sub}' and pred(p):
                        return p
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def hget(post: dict, name: str) -> str | None:
    for k, v in post['headers']:
        if k.lower() == name.lower():
            return v
    return None


def norm_state(s: str | None) -> str | None:
    if not s:
        return s
    s = s.lower()
    if s.startswith('task_state_'):
        s = s[len('task_state_'):]
    return s.replace('_', '-')


def push_shape(body) -> str:
    """'task' / 'statusUpdate' / 'artifactUpdate' / 'message' (StreamResponse) or 'Task(kind=task)'."""
    if not isinstance(body, dict):
        return 'non-json'
    if body.get('kind') == 'task':
        return 'Task(kind=task)'
    if body.get('kind'):
        return f"kind={body['kind']}"
    keys = [k for k in ('task', 'statusUpdate', 'artifactUpdate', 'message') if k in body]
    return 'StreamResponse.' + keys[0] if len(keys) == 1 else 'keys=' + ','.join(sorted(body))


def push_task_state(body) -> tuple[str | None, str | None]:
    """(taskId, state) carried by a push body of either shape (state None for artifacts)."""
    if not isinstance(body, dict):
        return None, None
    if body.get('kind') == 'task' or ('status' in body and 'id' in body):
        return body.get('id'), norm_state(body.get('status', {}).get('state'))
    if 'task' in body:
        t = body['task']
        return t.get('id'), norm_state(t.get('status', {}).get('state'))
    if 'statusUpdate' in body:
        u = body['statusUpdate']
        return u.get('taskId'), norm_state(u.get('status', {}).get('state'))
    if 'artifactUpdate' in body:
        return body['artifactUpdate'].get('taskId'), None
    return None, None


# ------------------------------------------------------------------------------------------
# Dialects: plain HTTP, as Countersign would speak them
# ------------------------------------------------------------------------------------------


class RpcError(Exception):
    pass


class Dialect:
    name = '?'

    def __init__(self, base: str, verbose: bool) -> None:
        self.base = base
        self.http = httpx.Client(timeout=15.0, trust_env=False)
        self.verbose = verbose
        self._id = 0

    def _rpc(self, method: str, params: dict, headers: dict | None = None):
        self._id += 1
        body = {'jsonrpc': '2.0', 'id': self._id, 'method': method, 'params': params}
        r = self.http.post(self.base + '/', json=body, headers=headers or {})
        if self.verbose:
            print(f'  > {method} {json.dumps(params)[:300]}\n  < {r.status_code} {r.text[:300]}', file=sys.stderr)
        r.raise_for_status()
        j = r.json()
        if 'error' in j:
            raise RpcError(json.dumps(j['error']))
        return j['result']


def read_sse(resp) -> list:
    events, data = [], []
    for line in resp.iter_lines():
        if line.startswith('data:'):
            data.append(line[5:].strip())
        elif line == '' and data:
            events.append(json.loads('\n'.join(data)))
            data = []
    if data:
        events.append(json.loads('\n'.join(data)))
    return events


class V1JsonRpc(Dialect):
    name = 'v1.0 JSON-RPC'
    H = {'A2A-Version': '1.0'}

    @staticmethod
    def message(text, data, task_id, context_id, message_id, files=()):
        parts = [{'text': text}] if text else []
        if data is not None:
            parts.append({'data': data})
        for f in files:
            parts.append({'url': f['url'], 'mediaType': f['mediaType'], 'filename': f['name']})
        m = {'messageId': message_id, 'role': 'ROLE_USER', 'parts': parts}
        if task_id:
            m['taskId'] = task_id
        if context_id:
            m['contextId'] = context_id
        return m

    @staticmethod
    def push_config(url, token, creds):
        return {'url': url, 'token': token, 'authentication': {'scheme': 'Bearer', 'credentials': creds}}

    def send(self, text, data=None, task_id=None, context_id=None, push=None, message_id=None,
             return_immediately=False, files=()) -> dict:
        cfg = {}
        if push:
            cfg['taskPushNotificationConfig'] = self.push_config(*push)
        if return_immediately:
            cfg['returnImmediately'] = True
        params = {'message': self.message(text, data, task_id, context_id, message_id or uuid.uuid4().hex, files)}
        if cfg:
            params['configuration'] = cfg
        res = self._rpc('SendMessage', params, self.H)
        return res['task']

    def stream(self, text, push) -> list:
        params = {'message': self.message(text, None, None, None, uuid.uuid4().hex),
                  'configuration': {'taskPushNotificationConfig': self.push_config(*push)}}
        body = {'jsonrpc': '2.0', 'id': 99, 'method': 'SendStreamingMessage', 'params': params}
        with self.http.stream('POST', self.base + '/', json=body, headers=self.H) as r:
            return [e.get('result', e) for e in read_sse(r)]

    def get(self, task_id) -> dict:
        return self._rpc('GetTask', {'id': task_id}, self.H)

    def cancel(self, task_id) -> dict:
        return self._rpc('CancelTask', {'id': task_id}, self.H)

    def set_push(self, task_id, url, token, creds) -> dict:
        p = self.push_config(url, token, creds)
        p['taskId'] = task_id
        return self._rpc('CreateTaskPushNotificationConfig', p, self.H)


class V1Rest(V1JsonRpc):
    name = 'v1.0 HTTP+JSON'

    def _req(self, method, path, body=None):
        r = self.http.request(method, self.base + path, json=body, headers=self.H)
        if self.verbose:
            print(f'  > {method} {path} {json.dumps(body)[:300]}\n  < {r.status_code} {r.text[:300]}', file=sys.stderr)
        if r.status_code >= 400:
            raise RpcError(f'{r.status_code} {r.text[:300]}')
        return r.json()

    def send(self, text, data=None, task_id=None, context_id=None, push=None, message_id=None,
             return_immediately=False, files=()) -> dict:
        cfg = {}
        if push:
            cfg['taskPushNotificationConfig'] = self.push_config(*push)
        if return_immediately:
            cfg['returnImmediately'] = True
        body = {'message': self.message(text, data, task_id, context_id, message_id or uuid.uuid4().hex, files)}
        if cfg:
            body['configuration'] = cfg
        return self._req('POST', '/message:send', body)['task']

    def stream(self, text, push) -> list:
        body = {'message': self.message(text, None, None, None, uuid.uuid4().hex),
                'configuration': {'taskPushNotificationConfig': self.push_config(*push)}}
        with self.http.stream('POST', self.base + '/message:stream', json=body, headers=self.H) as r:
            return read_sse(r)

    def get(self, task_id) -> dict:
        return self._req('GET', f'/tasks/{task_id}')

    def cancel(self, task_id) -> dict:
        return self._req('POST', f'/tasks/{task_id}:cancel', {})

    def set_push(self, task_id, url, token, creds) -> dict:
        return self._req('POST', f'/tasks/{task_id}/pushNotificationConfigs', self.push_config(url, token, creds))


class V03JsonRpc(Dialect):
    name = 'v0.3 JSON-RPC'

    @staticmethod
    def push_config(url, token, creds):
        return {'url': url, 'token': token, 'authentication': {'schemes': ['Bearer'], 'credentials': creds}}

    def send(self, text, data=None, task_id=None, context_id=None, push=None, message_id=None,
             return_immediately=False, files=()) -> dict:
        parts = [{'kind': 'text', 'text': text}] if text else []
        if data is not None:
            parts.append({'kind': 'data', 'data': data})
        for f in files:
            parts.append({'kind': 'file', 'file': {'uri': f['url'], 'mimeType': f['mediaType'], 'name': f['name']}})
        m = {'kind': 'message', 'messageId': message_id or uuid.uuid4().hex, 'role': 'user', 'parts': parts}
        if task_id:
            m['taskId'] = task_id
        if context_id:
            m['contextId'] = context_id
        cfg = {}
        if push:
            cfg['pushNotificationConfig'] = self.push_config(*push)
        if return_immediately:
            cfg['blocking'] = False
        params = {'message': m}
        if cfg:
            params['configuration'] = cfg
        return self._rpc('message/send', params)

    def stream(self, text, push) -> list:
        m = {'kind': 'message', 'messageId': uuid.uuid4().hex, 'role': 'user',
             'parts': [{'kind': 'text', 'text': text}]}
        params = {'message': m, 'configuration': {'pushNotificationConfig': self.push_config(*push)}}
        body = {'jsonrpc': '2.0', 'id': 99, 'method': 'message/stream', 'params': params}
        with self.http.stream('POST', self.base + '/', json=body) as r:
            return [e.get('result', e) for e in read_sse(r)]

    def get(self, task_id) -> dict:
        return self._rpc('tasks/get', {'id': task_id})

    def cancel(self, task_id) -> dict:
        return self._rpc('tasks/cancel', {'id': task_id})

    def set_push(self, task_id, url, token, creds) -> dict:
        return self._rpc('tasks/pushNotificationConfig/set',
                         {'taskId': task_id, 'pushNotificationConfig': self.push_config(url, token, creds)})


DIALECTS = {'v1-jsonrpc': V1JsonRpc, 'v1-rest': V1Rest, 'v03-jsonrpc': V03JsonRpc}


def state_of(task: dict) -> str | None:
    return norm_state(task.get('status', {}).get('state'))


def status_text(task: dict) -> str:
    parts = task.get('status', {}).get('message', {}).get('parts', [])
    return '\n'.join(p['text'] for p in parts if 'text' in p)


def echo_data(task: dict) -> list:
    out = []
    for a in task.get('artifacts', []):
        if a.get('name') == 'echo':
            for p in a.get('parts', []):
                if 'data' in p:
                    out.append(p['data'])
    return out


# ------------------------------------------------------------------------------------------
# Peer process
# ------------------------------------------------------------------------------------------


class Peer:
    def __init__(self, python: str, extra: list[str], log_path: str, verbose: bool) -> None:
        cmd = [python, os.path.join(HERE, 'peer_agent.py'), '--port', '0', '--log', log_path] + extra
        if verbose:
            cmd.append('-v')
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        line = self.proc.stdout.readline().strip()
        prefix = 'listening on '
        if not line.startswith(prefix):
            self.stop()
            raise RuntimeError(f'peer did not start: first line {line!r}; stderr: {self.stderr_text()[-2000:]}')
        self.first_line = line
        self.base = line[len(prefix):]

    def stderr_text(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode('utf-8', 'replace')

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=8)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


# ------------------------------------------------------------------------------------------
# Checks
# ------------------------------------------------------------------------------------------


class Checker:
    def __init__(self, name: str) -> None:
        self.name = name
        self.passed = 0
        self.failed = 0

    def check(self, what: str, ok: bool, detail: str = '') -> bool:
        if ok:
            self.passed += 1
            print(f'PASS {self.name}: {what}', flush=True)
        else:
            self.failed += 1
            print(f'FAIL {self.name}: {what}' + (f': {detail}' if detail else ''), flush=True)
        return ok

    def run(self, what: str, fn):
        try:
            return fn()
        except Exception as e:  # noqa: BLE001
            self.check(what, False, f'{type(e).__name__}: {e}')
            return None


def read_log(path: str) -> list[dict]:
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def describe_posts(posts: list[dict]) -> dict:
    return {
        'count': len(posts),
        'methods': sorted({p['method'] for p in posts}),
        'header_names': sorted({k for p in posts for k, _ in p['headers']}),
        'content_types': sorted({hget(p, 'content-type') or '' for p in posts}),
        'user_agents': sorted({hget(p, 'user-agent') or '' for p in posts}),
        'token_headers': sorted({k for p in posts for k, _ in p['headers'] if k.lower() in TOKEN_HEADERS}),
        'authorization': sorted({hget(p, 'authorization') or '(none)' for p in posts}),
        'sequence': [f'{push_shape(p["body"])}:{push_task_state(p["body"])[1] or "-"}' for p in posts],
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('--peer-python', required=True)
    ap.add_argument('--peer-arg', action='append', default=[])
    ap.add_argument('--dialect', choices=sorted(DIALECTS), required=True)
    ap.add_argument('--name', required=True)
    ap.add_argument('--expect-auth', choices=['yes', 'no'], default='yes')
    ap.add_argument('--report', default=None)
    ap.add_argument('-v', '--verbose', action='store_true')
    args = ap.parse_args()

    c = Checker(args.name)
    tmpdir = tempfile.mkdtemp(prefix='peer-check-')
    log_path = os.path.join(tmpdir, 'messages.jsonl')
    recv = Receiver()
    peer = None
    report: dict = {'variant': args.name, 'dialect': args.dialect}
    try:
        try:
            peer = Peer(args.peer_python, args.peer_arg, log_path, args.verbose)
        except Exception as e:  # noqa: BLE001
            c.check('peer starts and prints `listening on http://127.0.0.1:PORT`', False, str(e))
            return finish(c, args, report)
        c.check('peer first stdout line', peer.first_line.startswith('listening on http://127.0.0.1:'),
                peer.first_line)
        d = DIALECTS[args.dialect](peer.base, args.verbose)

        # -- card ---------------------------------------------------------------------------
        def card():
            r = d.http.get(peer.base + '/.well-known/agent-card.json')
            r.raise_for_status()
            j = r.json()
            caps = j.get('capabilities', {})
            urls = [i.get('url') for i in j.get('supportedInterfaces', [])] + [j.get('url')]
            c.check('agent card: name Peer, streaming, pushNotifications, url is itself',
                    j.get('name') == 'Peer' and caps.get('streaming') is True
                    and caps.get('pushNotifications') is True and peer.base in urls, json.dumps(j)[:400])
            report['sdk'] = j.get('protocolVersion'), [i.get('protocolVersion') for i in j.get('supportedInterfaces', [])]
        c.run('agent card', card)

        # -- ask + inline push + approve + duplicate ------------------------------------------
        def ask_flow():
            sub = 'ask'
            t = d.send('ask deploy', push=(recv.url(sub), TOKEN, CREDS))
            answered = time.monotonic()
            tid, cid = t['id'], t['contextId']
            report['ask_pushes_before_response'] = len([p for p in recv.for_sub(sub) if p['t'] < answered])
            c.check('ask -> input-required with the question',
                    state_of(t) == 'input-required' and status_text(t) == ASK_PROMPT, json.dumps(t)[:300])
            p = recv.wait(sub, lambda p: push_task_state(p['body']) == (tid, 'input-required'))
            c.check('push for input-required arrives', p is not None, f'{len(recv.for_sub(sub))} posts')
            if p is None:
                return
            tok = [v for k, v in p['headers'] if k.lower() in TOKEN_HEADERS]
            c.check('push carries the token header', tok == [TOKEN], str(p['headers']))
            auth = hget(p, 'authorization')
            if args.expect_auth == 'yes':
                c.check('push carries Authorization: Bearer c0ffee', auth == f'Bearer {CREDS}', str(auth))
            else:
                c.check('push carries no Authorization (stock 0.3 sender)', auth is None, str(auth))
            c.check('push Content-Type is application/json',
                    (hget(p, 'content-type') or '').startswith('application/json'), str(hget(p, 'content-type')))
            time.sleep(0.5)
            report['ask_until_input_required'] = describe_posts(recv.for_sub(sub))
            report['sample_push_input_required'] = p['body']
            report['sample_push_headers'] = p['headers']
            g = d.get(tid)
            c.check('GetTask after push -> input-required', state_of(g) == 'input-required', str(state_of(g)))

            n_before = len(recv.for_sub(sub))
            mid = 'approve-' + uuid.uuid4().hex[:8]
            data = {'decision': 'approve', 'comment': 'lgtm'}
            t2 = d.send('Approved', data=data, task_id=tid, context_id=cid, message_id=mid)
            c.check('approve follow-up -> completed "Approved by a person"',
                    state_of(t2) == 'completed' and status_text(t2) == 'Approved by a person',
                    json.dumps(t2)[:300])
            c.check('echo artifact carries the data part', echo_data(t2) == [data], json.dumps(t2.get('artifacts'))[:300])
            p2 = recv.wait(sub, lambda p: push_task_state(p['body']) == (tid, 'completed'))
            c.check('push for completed arrives', p2 is not None)
            time.sleep(0.5)
            report['approve_follow_up'] = describe_posts(recv.for_sub(sub)[n_before:])
            if p2 is not None:
                report['sample_push_completed'] = p2['body']

            n_before = len(recv.for_sub(sub))
            t3 = d.send('Approved', data=data, task_id=tid, context_id=cid, message_id=mid)
            c.check('duplicate messageId -> the task as it is, no error',
                    t3['id'] == tid and state_of(t3) == 'completed', json.dumps(t3)[:200])
            time.sleep(0.7)
            c.check('duplicate sends no push', len(recv.for_sub(sub)) == n_before,
                    f'{len(recv.for_sub(sub)) - n_before} extra posts')
            lines = [r for r in read_log(log_path) if r['messageId'] == mid]
            c.check('message log: one applied line + one duplicate line for the messageId',
                    [r['duplicate'] for r in lines] == [False, True]
                    and lines[0]['taskId'] == tid and lines[0]['data'] == [data], json.dumps(lines)[:400])
        c.run('ask flow', ask_flow)

        # -- reject --------------------------------------------------------------------------
        def reject_flow():
            t = d.send('Ask about prod')
            t2 = d.send('Rejected', data={'decision': 'reject', 'reason': 'not today'},
                        task_id=t['id'], context_id=t['contextId'])
            c.check('reject follow-up -> rejected "Rejected: not today"',
                    state_of(t2) == 'rejected' and status_text(t2) == 'Rejected: not today', json.dumps(t2)[:300])
            c.check('reject echo artifact', echo_data(t2) == [{'decision': 'reject', 'reason': 'not today'}])
        c.run('reject flow', reject_flow)

        def plain_flow():
            t = d.send('ASK deploy')
            t2 = d.send('staging', task_id=t['id'], context_id=t['contextId'])
            c.check('text follow-up -> completed "Deploying to staging", no artifact',
                    state_of(t2) == 'completed' and status_text(t2) == 'Deploying to staging'
                    and not t2.get('artifacts'), json.dumps(t2)[:300])
        c.run('plain follow-up flow', plain_flow)

        def reply_parts_flow():
            t = d.send('ask with a file')
            f = {'url': 'https://example.com/plan.pdf', 'mediaType': 'application/pdf', 'name': 'plan.pdf'}
            t2 = d.send('staging', data={'env': 'staging', 'replicas': 2}, files=[f],
                        task_id=t['id'], context_id=t['contextId'])
            parts = [p for a in t2.get('artifacts', []) if a.get('name') == 'echo' for p in a.get('parts', [])]
            urls = [p.get('url') or (p.get('file') or {}).get('uri') for p in parts]
            c.check('reply with text+data+file -> "Deploying to staging", echo holds data and file',
                    state_of(t2) == 'completed' and status_text(t2) == 'Deploying to staging'
                    and echo_data(t2) == [{'env': 'staging', 'replicas': 2}] and f['url'] in urls,
                    json.dumps(t2.get('artifacts'))[:400])
            line = [r for r in read_log(log_path) if r.get('taskId') == t['id'] and r['text'] == 'staging']
            c.check('message log keeps the reply parts', len(line) == 1 and len(line[0]['parts']) == 3,
                    json.dumps(line)[:400])
        c.run('reply parts flow', reply_parts_flow)

        def auth_flow():
            sub = 'auth'
            t = d.send('auth github', push=(recv.url(sub), TOKEN, CREDS))
            c.check('auth -> auth-required with the sign-in message',
                    state_of(t) == 'auth-required' and status_text(t) == AUTH_PROMPT, json.dumps(t)[:300])
            p = recv.wait(sub, lambda p: push_task_state(p['body']) == (t['id'], 'auth-required'))
            c.check('push for auth-required arrives', p is not None)
            t2 = d.send('signed in', task_id=t['id'], context_id=t['contextId'])
            c.check('auth follow-up -> completed "Signed in; continuing"',
                    state_of(t2) == 'completed' and status_text(t2) == 'Signed in; continuing', json.dumps(t2)[:300])
        c.run('auth flow', auth_flow)

        def slow_flow():
            sub = 'slow'
            t0 = time.monotonic()
            t = d.send('slow deploy', return_immediately=True)
            took = time.monotonic() - t0
            c.check('slow with returnImmediately/blocking=false answers at once (submitted/working)',
                    took < 1.5 and state_of(t) in ('submitted', 'working'), f'{took:.2f}s {state_of(t)}')
            cfg = d.set_push(t['id'], recv.url(sub), TOKEN, CREDS)
            c.check('push config registered after start', isinstance(cfg, dict) and bool(cfg.get('url') or cfg.get('pushNotificationConfig')), json.dumps(cfg)[:300])
            report['set_push_answer'] = cfg
            p = recv.wait(sub, lambda p: push_task_state(p['body']) == (t['id'], 'input-required'), timeout=8)
            c.check('push for input-required arrives after ~2 s', p is not None,
                    json.dumps(describe_posts(recv.for_sub(sub))))
            if p is not None:
                tok = [v for k, v in p['headers'] if k.lower() in TOKEN_HEADERS]
                c.check('late-registered push carries the token', tok == [TOKEN], str(p['headers']))
            time.sleep(0.3)
            report['slow_separately_registered'] = describe_posts(recv.for_sub(sub))
            g = d.get(t['id'])
            c.check('GetTask -> input-required with the question',
                    state_of(g) == 'input-required' and status_text(g) == ASK_PROMPT, json.dumps(g)[:300])
        c.run('slow flow', slow_flow)

        def done_flow():
            sub = 'done'
            t = d.send('hello there', push=(recv.url(sub), TOKEN, CREDS))
            c.check('other text -> completed "Done: hello there"',
                    state_of(t) == 'completed' and status_text(t) == 'Done: hello there', json.dumps(t)[:300])
            recv.wait(sub, lambda p: push_task_state(p['body']) == (t['id'], 'completed'), timeout=3)
            time.sleep(0.3)
            report['done_immediately'] = describe_posts(recv.for_sub(sub))
        c.run('done flow', done_flow)

        def cancel_flow():
            sub = 'cancel'
            t = d.send('ask to cancel', push=(recv.url(sub), TOKEN, CREDS))
            recv.wait(sub, lambda p: push_task_state(p['body']) == (t['id'], 'input-required'))
            n_before = len(recv.for_sub(sub))
            ct = d.cancel(t['id'])
            c.check('cancel input-required task -> canceled', state_of(ct) == 'canceled', json.dumps(ct)[:300])
            g = d.get(t['id'])
            c.check('GetTask after cancel -> canceled', state_of(g) == 'canceled', str(state_of(g)))
            recv.wait(sub, lambda p: push_task_state(p['body']) == (t['id'], 'canceled'), timeout=2)
            time.sleep(0.3)
            report['cancel'] = describe_posts(recv.for_sub(sub)[n_before:])
        c.run('cancel flow', cancel_flow)

        def cancel_working_flow():
            t = d.send('slow then cancel', return_immediately=True)
            time.sleep(0.3)
            ct = d.cancel(t['id'])
            c.check('cancel while working (slow) -> canceled', state_of(ct) == 'canceled', json.dumps(ct)[:300])
            time.sleep(2.2)
            g = d.get(t['id'])
            c.check('and it stays canceled after the 2 s', state_of(g) == 'canceled', str(state_of(g)))
        c.run('cancel working flow', cancel_working_flow)

        def dup_start_flow():
            mid = 'start-' + uuid.uuid4().hex[:8]
            a = d.send('ask twice', message_id=mid)
            b = d.send('ask twice', message_id=mid)
            c.check('same first messageId twice -> same task, not a new one', a['id'] == b['id'],
                    f"{a['id']} vs {b['id']}")
            lines = [r for r in read_log(log_path) if r['messageId'] == mid]
            c.check('message log for the repeated start: applied + duplicate',
                    [r['duplicate'] for r in lines] == [False, True], json.dumps(lines)[:300])
        c.run('duplicate start flow', dup_start_flow)

        def slow_inline_flow():
            sub = 'slowinline'
            t = d.send('slow inline', push=(recv.url(sub), TOKEN, CREDS), return_immediately=True)
            p = recv.wait(sub, lambda p: push_task_state(p['body']) == (t['id'], 'input-required'), timeout=8)
            c.check('slow + inline push + returnImmediately: input-required pushed', p is not None,
                    json.dumps(describe_posts(recv.for_sub(sub))))
            time.sleep(0.3)
            report['slow_inline_return_immediately'] = describe_posts(recv.for_sub(sub))
        c.run('slow inline flow', slow_inline_flow)

        def stream_flow():
            sub = 'stream'
            events = d.stream('ask via stream', (recv.url(sub), TOKEN, CREDS))
            tid = None
            for e in events:
                tid = tid or e.get('id') or e.get('taskId') or (e.get('task') or {}).get('id') \
                    or (e.get('statusUpdate') or {}).get('taskId')
            p = recv.wait(sub, lambda p: push_task_state(p['body'])[1] == 'input-required', timeout=5)
            c.check('streaming send + inline push: input-required pushed', p is not None,
                    json.dumps(describe_posts(recv.for_sub(sub))))
            time.sleep(0.3)
            report['stream_ask'] = describe_posts(recv.for_sub(sub))
            report['stream_ask_sse_events'] = len(events)
        c.run('stream flow', stream_flow)

        def failing_receiver_flow():
            sub = 'fail'
            t = d.send('ask with a failing webhook', push=(recv.url(sub), TOKEN, CREDS))
            c.check('a webhook answering 503 does not fail the task',
                    state_of(t) == 'input-required', json.dumps(t)[:200])
            time.sleep(2.0)
            report['webhook_503'] = describe_posts(recv.for_sub(sub))
        c.run('failing receiver flow', failing_receiver_flow)

        report['push_paths_seen'] = sorted({p['path'] for p in recv.posts})
        report['non_post_requests'] = [p for p in recv.posts if p['method'] != 'POST']
    finally:
        if peer is not None:
            peer.stop()
            if c.failed or args.verbose:
                print(f'--- {args.name} peer stderr (tail) ---\n{peer.stderr_text()[-4000:]}', file=sys.stderr)
        recv.close()
        shutil.rmtree(tmpdir, ignore_errors=True)
    return finish(c, args, report)


def print_digest(name: str, report: dict) -> None:
    """`#` lines: what this peer sent on push, for the README and the webhook receiver."""
    ask = report.get('ask_until_input_required')
    if not ask:
        return
    print(f'# {name} push: POST, Content-Type {",".join(ask["content_types"])}, '
          f'token header {",".join(ask["token_headers"]) or "(none)"}, '
          f'Authorization {",".join(ask["authorization"])}, User-Agent {",".join(ask["user_agents"])}')
    for key, label in (('ask_until_input_required', 'blocking send "ask"'),
                       ('approve_follow_up', 'approve follow-up'),
                       ('done_immediately', 'blocking send "hello"'),
                       ('slow_inline_return_immediately', 'non-blocking "slow", inline config'),
                       ('slow_separately_registered', 'non-blocking "slow", config set after start'),
                       ('stream_ask', 'streaming "ask"'),
                       ('cancel', 'cancel'),
                       ('webhook_503', 'webhook answers 503')):
        r = report.get(key)
        if r is not None:
            print(f'# {name} push: {label}: {r["count"]} POST(s) {" ".join(r["sequence"])}')
    if 'ask_pushes_before_response' in report:
        print(f'# {name} push: blocking "ask": {report["ask_pushes_before_response"]} POST(s) arrived '
              f'before the SendMessage response')


def finish(c: Checker, args, report: dict) -> int:
    report['passed'], report['failed'] = c.passed, c.failed
    print_digest(args.name, report)
    if args.report:
        with open(args.report, 'a') as f:
            f.write(json.dumps(report, sort_keys=True) + '\n')
    print(f'{args.name}: {c.passed} passed, {c.failed} failed', flush=True)
    return 1 if c.failed else 0


if __name__ == '__main__':
    sys.exit(main())
