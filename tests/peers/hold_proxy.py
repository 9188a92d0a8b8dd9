"""An HTTP proxy on 127.0.0.1 in front of a peer, for cutting a send short.

It passes every call on to the peer, and changes two things on the way back:

- the agent card: its interface URLs point at the proxy (and so it goes
  unsigned), and it offers no push notifications (so Countersign watches
  the task without a webhook, and no push can bring the task back after a
  stop). With `--pushes` it offers them, but the webhook a send carries is
  pointed at the proxy, which drops every push: pushes lost while
  Countersign was down, so that nothing but asking the peer brings the task
  back soon;
- the answer to the first send of a message whose text contains `[hold]`:
  the peer has taken the message and answered, but the proxy holds that
  answer for `--hold` seconds, long enough to kill Countersign before the
  answer reaches it. It prints `held <messageId>` on stdout when it starts
  holding one. The same message sent again passes at once.

And one thing on the way there: the first send of a message whose text
contains `[late]` waits `--late` seconds before it goes on to the peer, and
goes on even when Countersign hangs up meanwhile, as a message does whose
peer's agent is slow to make its task (the peer lists no task holding it
until then). It prints `late <messageId>` when it starts waiting, and
`went <messageId>` once the peer has answered it.

Standard library only. The first stdout line is `listening on http://127.0.0.1:PORT`.

    python3 hold_proxy.py --upstream http://127.0.0.1:PEER [--hold 60] [--late 5] [--pushes]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Countersign's webhook URLs, as a send carries them.
WEBHOOK = re.compile(rb'http://127\.0\.0\.1:[0-9]+/webhooks/')

PASSED_HEADERS = ('content-type', 'accept', 'authorization', 'a2a-version', 'a2a-extensions')


def marked_message(body: bytes, marker: str) -> str | None:
    """The id of the message a send carries when its text holds `marker`."""
    try:
        call = json.loads(body)
    except ValueError:
        return None
    if not isinstance(call, dict):
        return None
    params = call.get('params', call)
    message = params.get('message') if isinstance(params, dict) else None
    if not isinstance(message, dict) or marker not in json.dumps(message):
        return None
    return message.get('messageId') or message.get('message_id')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--upstream', required=True, help='the peer, e.g. http://127.0.0.1:8000')
    ap.add_argument('--hold', type=float, default=60.0, help='seconds a held answer waits')
    ap.add_argument('--late', type=float, default=5.0, help='seconds a late message waits')
    ap.add_argument('--pushes', action='store_true', help="keep the card's push notifications")
    args = ap.parse_args()
    upstream = args.upstream.rstrip('/')
    held_once: set[str] = set()
    late_once: set[str] = set()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def log_message(self, *_):
            pass

        def forward(self) -> None:
            length = int(self.headers.get('Content-Length') or 0)
            body = self.rfile.read(length) if length else None
            if self.path.startswith('/webhooks/'):
                # A push from the peer (see `--pushes`): lost.
                self.send_response(200)
                self.send_header('Content-Length', '0')
                self.end_headers()
                return
            if body and args.pushes:
                body = WEBHOOK.sub(self.server.base.encode() + b'/webhooks/', body)
            late = marked_message(body, '[late]') if body else None
            if late in late_once:
                late = None
            if late:
                late_once.add(late)
                print(f'late {late}', flush=True)
                time.sleep(args.late)
            headers = {k: v for k, v in self.headers.items() if k.lower() in PASSED_HEADERS}
            req = urllib.request.Request(upstream + self.path, data=body, headers=headers, method=self.command)
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    status, ctype, data = r.status, r.headers.get('Content-Type'), r.read()
            except urllib.error.HTTPError as e:
                status, ctype, data = e.code, e.headers.get('Content-Type'), e.read()
            except OSError as e:
                status, ctype, data = 502, 'text/plain', f'proxy: {e}'.encode()
            if late:
                print(f'went {late}', flush=True)
            if self.path.split('?')[0].endswith(('agent-card.json', 'agent.json')) and status == 200:
                text = data.decode().replace(upstream, self.server.base)
                card = json.loads(text)
                if not args.pushes:
                    card.setdefault('capabilities', {})['pushNotifications'] = False
                card.pop('signatures', None)
                data = json.dumps(card).encode()
            held = marked_message(body, '[hold]') if body else None
            if held and status == 200 and held not in held_once:
                held_once.add(held)
                print(f'held {held}', flush=True)
                time.sleep(args.hold)
            self.send_response(status)
            if ctype:
                self.send_header('Content-Type', ctype)
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except OSError:
                pass

        do_GET = forward
        do_POST = forward
        do_PUT = forward
        do_DELETE = forward

    server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    server.daemon_threads = True
    server.base = f'http://127.0.0.1:{server.server_address[1]}'
    print(f'listening on {server.base}', flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == '__main__':
    main()
