#!/usr/bin/env python3
"""Countersign's signed agent cards, checked by the official Python SDK's verifier.

    python card_signature.py BASE_URL AGENT_ID

Needs a2a-sdk 1.x with its `signing` extra (PyJWT): .venv-sdk1.

Every card is fetched and parsed by the SDK's own A2ACardResolver and checked
by a2a.utils.signing.create_signature_verifier (ES256 only). The key provider
takes the signature's `kid` and `jku`, fetches the JWKS at `jku` (which must
be on the server under test) and returns the JWK whose `kid` matches.

Checks (one PASS/FAIL line each; exit status 1 if any failed):
  agent-merged   BASE_URL/a2a/AGENT_ID card without A2A-Version (1.0 + 0.3 fields)
  agent-strict   the same with `A2A-Version: 1.0` (pure 1.0 card)
  root           BASE_URL/.well-known/agent-card.json
  legacy         BASE_URL/.well-known/agent.json (pre-0.3 name, merged)
  directory      every card listed by BASE_URL/a2a/agents
  tampered       a card whose name was changed after signing is refused
  wrong-key      a card checked against another key is refused
"""

from __future__ import annotations

import asyncio
import copy
import sys

import httpx

from cryptography.hazmat.primitives.asymmetric import ec

from a2a.client.card_resolver import A2ACardResolver, parse_agent_card
from a2a.utils.signing import (
    InvalidSignaturesError,
    SignatureVerificationError,
    create_signature_verifier,
)
from jwt import PyJWK
from jwt.algorithms import ECAlgorithm


class Check:
    def __init__(self) -> None:
        self.failed = 0

    def result(self, name: str, ok: bool, detail: str = '') -> None:
        print(f'{"PASS" if ok else "FAIL"} {name}{": " + detail if detail else ""}')
        if not ok:
            self.failed += 1


def key_provider_for(base_url: str, seen: list[str]):
    def provider(kid: str | None, jku: str | None):
        if not jku or not jku.startswith(base_url + '/'):
            raise ValueError(f'jku {jku!r} is not on the server under test')
        jwks = httpx.get(jku, timeout=10).raise_for_status().json()
        for jwk in jwks.get('keys', []):
            if jwk.get('kid') == kid:
                seen.append(kid)
                return PyJWK(jwk)
        raise ValueError(f'no key {kid!r} at {jku}')

    return provider


async def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    base_url, agent_id = sys.argv[1].rstrip('/'), sys.argv[2]
    check = Check()
    seen: list[str] = []
    verifier = create_signature_verifier(key_provider_for(base_url, seen), ['ES256'])

    async with httpx.AsyncClient(timeout=10) as http:
        agent = A2ACardResolver(http, f'{base_url}/a2a/{agent_id}')
        root = A2ACardResolver(http, base_url)
        cases = [
            ('agent-merged', agent, None, None),
            ('agent-strict', agent, None, {'headers': {'A2A-Version': '1.0'}}),
            ('root', root, None, None),
            ('legacy', root, '/.well-known/agent.json', None),
        ]
        for name, resolver, path, kwargs in cases:
            try:
                card = await resolver.get_agent_card(
                    relative_card_path=path, http_kwargs=kwargs, signature_verifier=verifier
                )
                check.result(name, len(card.signatures) >= 1, f'{len(card.signatures)} signature(s)')
            except Exception as e:  # noqa: BLE001 - any failure is a FAIL line
                check.result(name, False, f'{type(e).__name__}: {e}')

        try:
            listing = (await http.get(f'{base_url}/a2a/agents')).raise_for_status().json()
            cards = listing['agents']
            ok = len(cards) == listing['total'] and len(cards) >= 1
            for data in cards:
                verifier(parse_agent_card(copy.deepcopy(data)))
            check.result('directory', ok, f'{len(cards)} card(s) verified')
        except Exception as e:  # noqa: BLE001
            check.result('directory', False, f'{type(e).__name__}: {e}')

        data = (await http.get(f'{base_url}/a2a/{agent_id}/.well-known/agent-card.json')).json()

    tampered = copy.deepcopy(data)
    tampered['name'] = tampered['name'] + ' (changed)'
    try:
        verifier(parse_agent_card(tampered))
        check.result('tampered', False, 'a changed card verified')
    except InvalidSignaturesError:
        check.result('tampered', True, 'refused')
    except SignatureVerificationError as e:
        check.result('tampered', False, f'wrong error {type(e).__name__}')

    foreign_key = ec.generate_private_key(ec.SECP256R1()).public_key()
    foreign = PyJWK(ECAlgorithm.to_jwk(foreign_key, as_dict=True) | {'alg': 'ES256'})
    wrong = create_signature_verifier(lambda kid, jku: foreign, ['ES256'])
    try:
        wrong(parse_agent_card(copy.deepcopy(data)))
        check.result('wrong-key', False, 'verified with a foreign key')
    except InvalidSignaturesError:
        check.result('wrong-key', True, 'refused')

    check.result('keys', bool(seen), f'jku/kid resolved {len(seen)} time(s)')
    print(f'# card signatures: {check.failed} check(s) failed')
    return 1 if check.failed else 0


if __name__ == '__main__':
    sys.exit(asyncio.run(main()))
