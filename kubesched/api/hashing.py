"""Hashes that are the same in every process and run (Python's hash() is salted per process)."""

from __future__ import annotations

import hashlib
from typing import Any


def stable_hash64(*parts: Any) -> int:
    """A 64-bit hash of the parts' string forms."""
    h = hashlib.blake2b(digest_size=8)
    for p in parts:
        h.update(str(p).encode())
        h.update(b"\x00")
    return int.from_bytes(h.digest(), "little")
