"""`kubesched convert FILE`: an old configuration document written out in the version kubesched reads.

The conversion itself is `kubesched.config.convert`; this reads the file (any document of the two kinds, also
inside a ConfigMap), converts, checks that the result parses, and renders YAML (with the notes as comments at
the top) or JSON. A document already in the current version is written back unchanged, with a note.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from kubesched.api.documents import read_document
from kubesched.config.convert import (
    DESCHEDULER_V1ALPHA2,
    SCHEDULER_V1,
    convert_descheduler_policy,
    convert_scheduler_config,
    is_old_descheduler_policy,
    is_old_scheduler_config,
)
from kubesched.config.descheduler_policy import PluginCatalog, parse_descheduler_policy
from kubesched.config.scheduler_config import parse_scheduler_config
from kubesched.diagnostics import warn
from kubesched.errors import InputError

KINDS = ("KubeSchedulerConfiguration", "DeschedulerPolicy")


def convert_document(raw: dict[str, Any], file: str) -> tuple[dict[str, Any], list[str]]:
    """The converted document and the notes about it (an InputError names the field it cannot convert)."""
    try:
        if is_old_scheduler_config(raw):
            return convert_scheduler_config(raw)
        if is_old_descheduler_policy(raw):
            return convert_descheduler_policy(raw)
    except InputError as e:
        raise e.located(file=file, obj=str(raw.get("kind"))) from None
    kind, version = raw.get("kind"), raw.get("apiVersion")
    if (kind, version) in (("KubeSchedulerConfiguration", SCHEDULER_V1), ("DeschedulerPolicy", DESCHEDULER_V1ALPHA2)):
        return raw, [f"{kind} {version} is already the version kubesched reads: nothing to convert"]
    raise InputError(f"cannot convert {kind} {version}: kubesched converts KubeSchedulerConfiguration "
                     "kubescheduler.config.k8s.io/v1beta1, v1beta2 and v1beta3 (to v1) and DeschedulerPolicy "
                     "descheduler/v1alpha1 (to v1alpha2)", file=file, field="apiVersion")


def _check(doc: dict[str, Any], file: str, registry: PluginCatalog) -> None:
    """Parse the result the way the commands will, so the user hears now what they would refuse."""
    try:
        if doc.get("kind") == "KubeSchedulerConfiguration":
            parse_scheduler_config(doc, file)
        else:
            parse_descheduler_policy(doc, file, registry)
    except InputError as e:
        warn(f"the converted document is not accepted as it stands: {e.render()}", file=file)


def convert_file(path: str, registry: PluginCatalog, output: str = "yaml") -> str:
    """The converted document as text; a policy's plugins are checked against `registry` (the descheduler's,
    kubesched.descheduler.registry.default_registry())."""
    raw = read_document(path, "KubeSchedulerConfiguration or DeschedulerPolicy", KINDS)
    doc, notes = convert_document(raw, path)
    for note in notes:
        warn(note, file=path)
    _check(doc, path, registry)
    if output == "json":
        return json.dumps(doc, indent=2) + "\n"
    header = "".join(f"# {line}\n" for note in [f"converted by kubesched convert from {path}"] + notes
                     for line in _wrap(note))
    return header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def _wrap(text: str, width: int = 110) -> list[str]:
    words, lines, cur = text.split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    return lines + ([cur] if cur else [])
