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


def stable_hash64_hex(*parts: Any) -> str:
    """`stable_hash64` as 16 hex digits (most significant first), hashed in one call: the same bytes as
    the part-by-part updates, and the digest's bytes reversed are the little-endian number's."""
    data = ("\x00".join([str(p) for p in parts]) + "\x00").encode()
    return hashlib.blake2b(data, digest_size=8).digest()[::-1].hex()
