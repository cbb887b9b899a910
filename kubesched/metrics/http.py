"""GET a JSON document over HTTP(S) with the standard library: bearer tokens, TLS options, clear errors."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from kubesched.api.documents import decode_text, loads_json
from kubesched.errors import InputError, RemoteError

DEFAULT_TIMEOUT_SECONDS = 10.0
_LOOPBACK = ("localhost", "127.0.0.1", "::1")


def _opener(url: str, insecure: bool, ca_file: str | None) -> urllib.request.OpenerDirector:
    handlers: list[urllib.request.BaseHandler] = []
    host = urllib.parse.urlsplit(url).hostname or ""
    if host in _LOOPBACK or host.startswith("127."):
        # A proxy from the environment must never see loopback traffic.
        handlers.append(urllib.request.ProxyHandler({}))
    if url.startswith("https:"):
        ctx = ssl.create_default_context(cafile=ca_file)
        if insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        handlers.append(urllib.request.HTTPSHandler(context=ctx))
    return urllib.request.build_opener(*handlers)


def get_json(url: str, *, params: dict[str, str] | None = None, token: str | None = None,
             insecure: bool = False, ca_file: str | None = None,
             timeout: float = DEFAULT_TIMEOUT_SECONDS, what: str = "metrics") -> Any:
    """The decoded JSON body of a GET; an InputError naming the URL for any failure."""
    full = url
    if params:
        full += ("&" if "?" in url else "?") + urllib.parse.urlencode(params)
    req = urllib.request.Request(full, headers={"Accept": "application/json"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with _opener(url, insecure, ca_file).open(req, timeout=timeout) as resp:
            body = resp.read()
    except urllib.error.HTTPError as e:
        detail = ""
        try:
            detail = e.read().decode("utf-8", "replace").strip()[:200]
        except OSError:  # the status line is enough when the body cannot be read
            detail = ""
        raise InputError(f"{what}: GET {full} answered {e.code} {e.reason}" + (f": {detail}" if detail else "")) from None
    except ValueError as e:  # a malformed URL: the input's fault
        raise InputError(f"{what}: cannot GET {full}: {e}") from None
    except (urllib.error.URLError, OSError) as e:
        # The address is well formed but nothing answered: a runtime failure (exit 1), not bad input.
        reason = getattr(e, "reason", e)
        raise RemoteError(f"{what}: cannot GET {full}: {reason}") from None
    try:
        return loads_json(decode_text(body, None), None)
    except InputError as e:
        raise InputError(f"{what}: GET {full} did not return usable JSON ({e.message})") from None
