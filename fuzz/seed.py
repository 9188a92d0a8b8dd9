#!/usr/bin/env python3
"""Writes starting inputs for the fuzz targets into fuzz/seeds/<target>/ from
the test fixtures (tests/fixtures/) and the JSON examples in the A2A specs.
Targets whose input starts with a selector byte get one file per selector.
Usage: python3 fuzz/seed.py [SPEC_DIR ...]"""
import hashlib
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "fuzz" / "seeds"

# Target -> how many selector values its first byte takes (0: no selector).
SELECTORS = {
    "jsonrpc_envelope": 3,
    "codec_v1": 8,
    "codec_v0_3": 14,
    "rest_bodies": 256,
    "webhook_push": 0,
}


def documents():
    for path in sorted((ROOT / "tests" / "fixtures").rglob("*.json")):
        try:
            yield json.loads(path.read_text())
        except ValueError:
            pass
    for spec_dir in sys.argv[1:]:
        for md in sorted(pathlib.Path(spec_dir).rglob("*.md")):
            for block in re.findall(r"```json\n(.*?)```", md.read_text(), re.S):
                try:
                    yield json.loads(block)
                except ValueError:
                    pass


def parts(doc, depth=0):
    """The document and the objects inside it, two levels down."""
    if isinstance(doc, dict):
        yield doc
        if depth < 2:
            for v in doc.values():
                yield from parts(v, depth + 1)
    elif isinstance(doc, list) and depth < 2:
        for v in doc:
            yield from parts(v, depth + 1)


def write(target, data):
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


def main():
    values = {}
    for doc in documents():
        for p in parts(doc):
            text = json.dumps(p, separators=(",", ":")).encode()
            if len(text) <= 4096:
                values[text] = p
    for text, value in values.items():
        for target, n in SELECTORS.items():
            if target == "jsonrpc_envelope" and "jsonrpc" not in value:
                continue
            if n == 0:
                write(target, text)
            elif target == "rest_bodies":
                # Both bindings, each route, JSON content type.
                for sel in [0, 1, 2, 3, 4, 0x80, 0x81, 0x82, 0x83]:
                    write(target, bytes([sel]) + text)
            else:
                for sel in range(n):
                    write(target, bytes([sel]) + text)
    # Markdown: the text parts of every document, and the XSS corpus.
    for text, value in values.items():
        for k in ("text", "message"):
            if isinstance(value.get(k), str):
                write("markdown", value[k].encode())
    xss = (ROOT / "tests" / "render_xss.rs").read_text()
    for m in re.findall(r'v\(\s*\w+,\s*"((?:[^"\\]|\\.)*)"', xss):
        m = re.sub(r"\\u\{([0-9a-fA-F]+)\}", lambda x: chr(int(x.group(1), 16)), m)
        for esc, c in (("\\n", "\n"), ("\\t", "\t"), ('\\"', '"'), ("\\\\", "\\")):
            m = m.replace(esc, c)
        write("markdown", m.encode("utf-8", "replace"))
    for md in sorted(ROOT.glob("*.md")):
        write("markdown", md.read_bytes()[:8192])


if __name__ == "__main__":
    main()
