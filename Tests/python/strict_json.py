"""The verdict of Python's json module on each text, held to the rules
StrictJSON claims: RFC 8259 (no NaN or Infinity), UTF-8, no lone surrogate,
and no member name twice in one object (names compared after NFC, as Swift's
String compares). Reads one base64 text per line; prints "ok" or "refused"."""
import base64
import json
import sys
import unicodedata


def unique(pairs):
    seen = set()
    for name, _ in pairs:
        normal = unicodedata.normalize("NFC", name)
        if normal in seen:
            raise ValueError("repeated member name")
        seen.add(normal)
    return dict(pairs)


def constant(name):
    raise ValueError("not JSON: " + name)


def has_surrogate(value):
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, list):
        return any(has_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(has_surrogate(k) or has_surrogate(v) for k, v in value.items())
    return False


for line in sys.stdin:
    raw = base64.b64decode(line.strip())
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        value = json.loads(raw.decode("utf-8"), object_pairs_hook=unique, parse_constant=constant)
        print("refused" if has_surrogate(value) else "ok")
    except (ValueError, RecursionError):
        print("refused")
