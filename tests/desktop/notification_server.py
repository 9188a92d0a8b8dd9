"""A stand-in desktop notification service for tests.

Owns org.freedesktop.Notifications on the session bus (run it under
`dbus-run-session`), answers like a real server, and appends each Notify
call (with its simple hints: `sound-name`, `suppress-sound`, …) to a JSON
Lines file so a test can assert what the app showed (and a
benchmark can time it: `time_ns` is the wall clock, `time.time_ns()`, when
the call arrived).

    python notification_server.py RECORD_FILE

Prints `ready` on stdout once it owns the name. A test clicks notifications
by writing their ids, one per line, to RECORD_FILE.click: each gets the
`default` action (ActionInvoked), as a click on it would.
"""
import asyncio
import json
import os
import sys
import time

from dbus_next.aio import MessageBus
from dbus_next.service import ServiceInterface, method, signal


def plain(hints) -> dict:
    """The hints whose values are strings, booleans or numbers (sound,
    urgency, category), as JSON."""
    return {k: v.value for k, v in hints.items()
            if isinstance(v.value, (str, bool, int, float))}


class Notifications(ServiceInterface):
    def __init__(self, record: str):
        super().__init__('org.freedesktop.Notifications')
        self.record = record
        self.next_id = 1

    @method()
    def Notify(self, app_name: 's', replaces_id: 'u', app_icon: 's', summary: 's',
               body: 's', actions: 'as', hints: 'a{sv}', expire_timeout: 'i') -> 'u':
        at = time.time_ns()
        nid = self.next_id
        self.next_id += 1
        with open(self.record, 'a', encoding='utf-8') as f:
            f.write(json.dumps({'id': nid, 'app': app_name, 'summary': summary,
                                'body': body, 'actions': list(actions),
                                'hints': plain(hints), 'time_ns': at}) + '\n')
        return nid

    @method()
    def CloseNotification(self, nid: 'u'):
        return None

    @signal()
    def ActionInvoked(self, nid, key) -> 'us':
        return [nid, key]

    @method()
    def GetCapabilities(self) -> 'as':
        return ['body', 'actions', 'sound']

    @method()
    def GetServerInformation(self) -> 'ssss':
        return ['countersign-test', 'countersign', '1.0', '1.2']


async def clicks(service: Notifications, path: str) -> None:
    """Clicks the notifications whose ids appear in `path`."""
    while True:
        await asyncio.sleep(0.05)
        try:
            with open(path, encoding='utf-8') as f:
                ids = [int(line) for line in f.read().split()]
            os.remove(path)
        except FileNotFoundError:
            continue
        for nid in ids:
            service.ActionInvoked(nid, 'default')


async def main() -> None:
    bus = await MessageBus().connect()
    service = Notifications(sys.argv[1])
    bus.export('/org/freedesktop/Notifications', service)
    await bus.request_name('org.freedesktop.Notifications')
    print('ready', flush=True)
    await clicks(service, sys.argv[1] + '.click')


if __name__ == '__main__':
    asyncio.run(main())
