"""Reading documents from files: bytes → text → YAML or JSON values, with every failure a clear InputError.

What the API machinery does before any object is looked at, and what kubesched adds so that no input can
crash it:

- the file is read whole up to `MAX_FILE_BYTES` and decoded as UTF-8 (a byte-order mark is dropped, as
  sigs.k8s.io/yaml does); anything else names the offending byte and its line;
- JSON goes to the JSON decoder (NaN and Infinity are not JSON); YAML to libyaml's parser with a Python
  composer, which fails with an error rather than exhausting the C stack on deep nesting;
- YAML is read the way Kubernetes reads it (sigs.k8s.io/yaml → JSON): timestamps stay strings, mapping keys
  become strings, and a key repeated in one mapping is an error ("key ... already set in map");
- the decoded values are checked once: at most `MAX_DEPTH` levels of nesting, only finite numbers, and
  YAML aliases that do not expand past the size of the file (no "billion laughs", no recursive anchors).

`select_document` picks the one configuration document a component reads from a file that may hold
several documents or a ConfigMap wrapping it, and says what it expected when the file holds something else.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, ScalarNode
from yaml.resolver import Resolver

from kubesched.diagnostics import warn
from kubesched.errors import InputError

MAX_FILE_BYTES = 512 * 2**20
MAX_DEPTH = 100
# A bearer token file is small; a bigger file is the wrong file.
TOKEN_BYTES = 1 * 2**20

_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"

# libyaml's parser (C, iterative, with an explicit state stack) when PyYAML was built with it.
_CParser: Any
try:
    from yaml.cyaml import CParser as _CParser  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    _CParser = None

class _KubernetesResolver(Resolver):
    """YAML 1.1 implicit types without timestamps: Kubernetes keeps `2024-01-01T00:00:00Z` a string."""


_KubernetesResolver.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in Resolver.yaml_implicit_resolvers.items()
}


class DuplicateKeyError(ConstructorError):
    pass


class _KubernetesConstructor(SafeConstructor):
    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        non_string = False
        if isinstance(node, MappingNode):
            seen: set[tuple[str, str]] = set()
            for key_node, _ in node.value:
                tag = key_node.tag
                if tag != _STR_TAG:
                    if tag == _MERGE_TAG:
                        continue
                    non_string = True
                if isinstance(key_node, ScalarNode):
                    k = (tag, key_node.value)
                    if k in seen:
                        raise DuplicateKeyError(None, None, f"key {key_node.value!r} already set in map",
                                                key_node.start_mark)
                    seen.add(k)
        mapping = super().construct_mapping(node, deep)
        if non_string:
            # sigs.k8s.io/yaml turns every key into a JSON string.
            mapping = {_key_text(k): v for k, v in mapping.items()}
        return mapping


def _key_text(k: Any) -> str:
    if isinstance(k, str):
        return k
    if k is None:
        return "null"
    if isinstance(k, bool):
        return "true" if k else "false"
    return str(k)




_COMPOSER_METHODS = ("check_node", "get_node", "get_single_node", "compose_document", "compose_node",
                     "compose_scalar_node", "compose_sequence_node", "compose_mapping_node")


class _PythonLoader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, Composer, _KubernetesConstructor,
                    _KubernetesResolver):
    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        Composer.__init__(self)
        _KubernetesConstructor.__init__(self)
        _KubernetesResolver.__init__(self)


def _make_loader(python_composer: bool) -> Any:
    if _CParser is None:  # pragma: no cover - PyYAML built without libyaml
        return _PythonLoader

    def __init__(self: Any, stream: str) -> None:
        _CParser.__init__(self, stream)
        if python_composer:
            Composer.__init__(self)
        _KubernetesConstructor.__init__(self)
        _KubernetesResolver.__init__(self)

    namespace: dict[str, Any] = {name: getattr(Composer, name) for name in _COMPOSER_METHODS} if python_composer else {}
    namespace["__init__"] = __init__
    return type("KubernetesYAMLLoader", (_CParser, _KubernetesConstructor, _KubernetesResolver), namespace)


# libyaml composes the node tree recursively in C: fast, but deep enough nesting overflows the C stack (a crash,
# not an exception). Text that cannot nest deeper than this goes that way; other text gets PyYAML's Python
# composer on libyaml's events, which fails with a RecursionError instead (about a third slower).
C_COMPOSER_DEPTH_BOUND = 4000
FastYAMLLoader = _make_loader(python_composer=False)
SafeYAMLLoader = _make_loader(python_composer=True)


def nesting_bound(text: str) -> int:
    """An upper bound of the nesting depth of YAML text, whatever its quoting.

    Flow nesting needs an unmatched `[` or `{` per level (an empty `[]`/`{}` nests nothing); block nesting
    needs indentation or a `- `/`? ` indicator per level or every other level (a sequence may sit at its
    key's indentation), so it is at most twice the longest line.
    """
    flow = text.count("[") - text.count("[]") + text.count("{") - text.count("{}") + 1
    longest = max((len(line) for line in text.splitlines()), default=0)
    return flow + 2 * longest + 2


# ---------------------------------------------------------------- bytes and text


def read_bytes(path: str | Path, limit: int = MAX_FILE_BYTES) -> bytes:
    p = Path(path)
    try:
        with p.open("rb") as fh:
            data = fh.read(limit + 1)
    except OSError as e:
        raise InputError(f"cannot read file: {e.strerror or e}", file=str(path)) from None
    if len(data) > limit:
        raise InputError(f"the file is larger than {limit // 2**20} MiB; kubesched reads files up to that size",
                         file=str(path))
    return data


def decode_text(data: bytes, file: str | None) -> str:
    """UTF-8 text (a leading byte-order mark dropped); anything else is an error naming the byte."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError("the file is UTF-16 text; kubesched reads UTF-8 (convert it, e.g. with iconv -f UTF-16 "
                         "-t UTF-8)", file=file)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InputError(f"not UTF-8 text: byte 0x{data[e.start]:02x} at offset {e.start} (line {line}); "
                         "kubesched reads YAML and JSON as UTF-8", file=file) from None


# ---------------------------------------------------------------- parsing


class _NotJSONConstant(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _NotJSONConstant(name)


def loads_json(text: str, file: str | None = None, what: str = "JSON") -> Any:
    """One JSON value, checked like a document (depth, finite numbers)."""
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except _NotJSONConstant as e:
        raise InputError(f"invalid {what}: {e} is not a JSON number", file=file) from None
    except json.JSONDecodeError as e:
        raise InputError(f"invalid {what} at line {e.lineno} column {e.colno}: {e.msg}", file=file) from None
    except RecursionError:
        raise InputError(f"invalid {what}: nested more than {MAX_DEPTH} levels deep", file=file) from None
    except ValueError as e:  # an integer of more digits than Python converts
        raise InputError(f"invalid {what}: {e}", file=file) from None
    check_values([value], len(text), file)
    return value


def _yaml_error(e: yaml.YAMLError) -> str:
    mark = getattr(e, "problem_mark", None)
    where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    return f"invalid YAML{where}: {problem}"


def loads_yaml(text: str, file: str | None = None) -> list[Any]:
    """Every document of a YAML stream (empty documents dropped), read the way Kubernetes reads YAML."""
    loader = (FastYAMLLoader if nesting_bound(text) <= C_COMPOSER_DEPTH_BOUND else SafeYAMLLoader)(text)
    docs: list[Any] = []
    try:
        while loader.check_data():
            d = loader.get_data()
            if d is not None:
                docs.append(d)
    except yaml.YAMLError as e:
        raise InputError(_yaml_error(e), file=file) from None
    except RecursionError:
        raise InputError(f"invalid YAML: nested more than {MAX_DEPTH} levels deep", file=file) from None
    except ValueError as e:  # an integer literal of more digits than Python converts
        raise InputError(f"invalid YAML: {e}", file=file) from None
    finally:
        loader.dispose()
    check_values(docs, len(text), file)
    return docs


def parse_text(text: str, file: str | None = None) -> list[Any]:
    """The documents of a YAML or JSON text."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            value = json.loads(text, parse_constant=_reject_constant)
        except RecursionError:
            raise InputError(f"invalid JSON: nested more than {MAX_DEPTH} levels deep", file=file) from None
        except _NotJSONConstant as e:
            raise InputError(f"invalid JSON: {e} is not a JSON number", file=file) from None
        except ValueError as e:
            # JSON is YAML too (flow style, comments): only if YAML also fails is it an error.
            try:
                return loads_yaml(text, file)
            except InputError:
                if isinstance(e, json.JSONDecodeError):
                    raise InputError(f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}", file=file) from None
                raise InputError(f"invalid JSON: {e}", file=file) from None
        check_values([value], len(text), file)
        return [value]
    return loads_yaml(text, file)


def read_documents(path: str | Path) -> list[Any]:
    """Every document in a YAML or JSON file (multi-document YAML gives several)."""
    file = str(path)
    return parse_text(decode_text(read_bytes(path), file), file)


def read_text(path: str | Path, limit: int = MAX_FILE_BYTES) -> str:
    """A text file (CSV, a token), read with the same size bound and decoding errors as documents."""
    return decode_text(read_bytes(path, limit), str(path))


# ---------------------------------------------------------------- checking decoded values


def check_values(docs: Iterable[Any], text_length: int, file: str | None) -> None:
    """Depth, finite numbers and alias expansion of decoded documents (one pass, no recursion)."""
    budget = 2 * text_length + 1000  # more values than characters can only come from YAML aliases
    dict_t, list_t, float_t = dict, list, float
    stack: list[tuple[Any, int]] = []
    for d in docs:
        if type(d) is dict_t or type(d) is list_t:
            stack.append((d, 1))
        else:
            _check_scalar(d, file)
    count = 0
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > budget:
            raise InputError("YAML aliases expand to more values than the file holds (recursive or exponential "
                             "anchors); write the values out", file=file)
        if depth > MAX_DEPTH:
            raise InputError(f"nested more than {MAX_DEPTH} levels deep", file=file,
                             field=_deep_path(list(docs)))
        items = value.values() if type(value) is dict_t else value
        child = depth + 1
        for v in items:
            t = type(v)
            if t is dict_t or t is list_t:
                stack.append((v, child))
            elif t is float_t and not math.isfinite(v) or t is not str and t is not int and t is not bool \
                    and t is not float_t and v is not None:
                _check_scalar(v, file)


def _check_scalar(v: Any, file: str | None) -> None:
    t = type(v)
    if t is float and not math.isfinite(v):
        raise InputError(f"{v} is not a number Kubernetes accepts (JSON has no NaN or infinity)", file=file)
    if v is not None and t not in (str, int, bool, float):
        raise InputError(f"a YAML value of type {t.__name__} ({_short(v)}) is not JSON; write it as a string or "
                         "number", file=file)


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _deep_path(docs: list[Any]) -> str | None:
    """The field path to the first value nested too deeply (only computed for the error message)."""
    stack: list[tuple[Any, str, int]] = [(d, f"document {i + 1}", 1) for i, d in enumerate(docs)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            return path if len(path) <= 80 else path[:77] + "..."
        if isinstance(value, dict):
            stack.extend((v, f"{path}.{k}", depth + 1) for k, v in value.items() if isinstance(v, (dict, list)))
        elif isinstance(value, list):
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value) if isinstance(v, (dict, list)))
    return None


# ---------------------------------------------------------------- configuration documents


def describe(value: Any) -> str:
    """What a value is, for messages: 'a list of 3 strings', 'an object with kind Pod', 'a number'."""
    if value is None:
        return "nothing (an empty document)"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {_short(value)}"
    if isinstance(value, list):
        if not value:
            return "an empty list"
        kinds = {type(v) for v in value}
        noun = {str: "string", int: "number", float: "number", bool: "boolean", dict: "object",
                list: "list"}.get(next(iter(kinds)), "value") if len(kinds) == 1 else "value"
        return f"a list of {len(value)} {noun}{'' if len(value) == 1 else 's'}"
    if isinstance(value, dict):
        kind = value.get("kind")
        if isinstance(kind, str) and kind:
            api = value.get("apiVersion")
            return f"a {kind} ({api})" if isinstance(api, str) and api else f"a {kind}"
        keys = ", ".join(map(str, list(value)[:4]))
        return f"an object without kind (fields {keys}{', ...' if len(value) > 4 else ''})"
    return type(value).__name__


def _flatten(docs: list[Any]) -> list[Any]:
    out: list[Any] = []
    for d in docs:
        if isinstance(d, dict) and isinstance(d.get("kind"), str) and d["kind"].endswith("List") \
                and isinstance(d.get("items"), list):
            out.extend(d["items"])
        else:
            out.append(d)
    return out


def _from_config_map(doc: dict[str, Any], kinds: tuple[str, ...], file: str) -> list[tuple[dict[str, Any], str]]:
    """The documents of the wanted kinds held in a ConfigMap's data (how Helm charts ship configurations)."""
    data = doc.get("data")
    if not isinstance(data, dict):
        return []
    name = (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), dict) else None
    found: list[tuple[dict[str, Any], str]] = []
    for key, text in data.items():
        if not isinstance(text, str):
            continue
        try:
            inner = parse_text(text, file)
        except InputError:
            continue
        for d in inner:
            if isinstance(d, dict) and d.get("kind") in kinds:
                found.append((d, f"ConfigMap {name or '?'} data.{key}"))
    return found


def select_document(docs: list[Any], kinds: tuple[str, ...], file: str, what: str | None = None) -> dict[str, Any]:
    """The one document of `kinds` a component reads from a file's documents.

    Like kube-scheduler, the descheduler and the kubelet (which decode the first document of their file),
    the first document of the kind is used; further ones are named in a warning. A ConfigMap holding the
    document in its data is opened. Anything else is an error that says what the file holds instead.
    """
    what = what or kinds[0]
    found: list[tuple[dict[str, Any], str]] = []
    others: list[Any] = []
    for d in _flatten(docs):
        if isinstance(d, dict) and d.get("kind") in kinds:
            found.append((d, ""))
            continue
        inner = _from_config_map(d, kinds, file) if isinstance(d, dict) and d.get("kind") == "ConfigMap" else []
        found.extend(inner)
        if not inner:
            others.append(d)
    if not found:
        if not docs:
            raise InputError(f"the file holds no document; expected a {what} (apiVersion, kind, ...)", file=file)
        if len(docs) == 1:
            if isinstance(docs[0], dict) and docs[0].get("kind") is not None:
                return docs[0]  # the component's own parser names the wrong kind or apiVersion
            raise InputError(f"expected a {what} object (apiVersion, kind, ...), got {describe(docs[0])}", file=file)
        held = ", ".join(describe(d) for d in docs[:4]) + (", ..." if len(docs) > 4 else "")
        raise InputError(f"expected a {what} object (apiVersion, kind, ...); the file's {len(docs)} documents "
                         f"are {held}", file=file)
    doc, origin = found[0]
    if len(found) > 1:
        warn(f"{len(found)} {what} documents; the first{' (' + origin + ')' if origin else ''} is used, as the "
             "component itself does (put each in its own file to use another)", file=file)
    if others:
        held = ", ".join(describe(d) for d in others[:3]) + (", ..." if len(others) > 3 else "")
        warn(f"{len(others)} other document(s) not read as a {what}: {held}", file=file)
    return doc


def read_document(path: str | Path, what: str, kinds: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The one configuration document of a file (see `select_document`)."""
    return select_document(read_documents(path), kinds or (what,), str(path), what)
