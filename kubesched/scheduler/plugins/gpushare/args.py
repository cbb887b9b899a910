"""Typed args of the GPU-sharing plugins: upstream's GpuPluginCfg and OpenGpuSharePluginCfg.

From hkust-adsl/kubernetes-scheduler-simulator `pkg/type/config.go`. Upstream leaves every field empty
when a config omits it (and then panics on first use); the defaults here are those its experiment
script `scripts/generate_config_and_run.py` passes when not told otherwise (share, max, best).
`scripts/generate_config_and_run.py` writes `dimExtMethod` and `normMethod` for every score plugin it
enables, so every GPU policy accepts them, and only DotProductScore reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubesched.errors import InputError
from kubesched.scheduler.plugins.args import check_known, get_str

DIM_EXT_METHODS = ("merge", "share", "divide", "extend")
NORM_METHODS = ("node", "pod", "max")
GPU_SEL_BUILTIN = ("best", "worst", "random")


def _choice(raw: Mapping[str, Any], key: str, default: str, allowed: tuple[str, ...]) -> str:
    v = get_str(dict(raw), key, default)
    assert v is not None
    if v not in allowed:
        raise InputError(f"expected one of {', '.join(allowed)}, got {v!r}", field=key)
    return v


@dataclass(frozen=True, slots=True)
class GpuPolicyArgs:
    """GpuPluginCfg: how a score plugin extends the GPU dimension and normalises resource vectors."""

    dim_ext_method: str = "share"
    norm_method: str = "max"

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "args") -> GpuPolicyArgs:
        raw = raw or {}
        try:
            check_known(dict(raw), ("dimExtMethod", "normMethod"))
            return cls(_choice(raw, "dimExtMethod", "share", DIM_EXT_METHODS),
                       _choice(raw, "normMethod", "max", NORM_METHODS))
        except InputError as e:
            raise e.located(field_prefix=field) from None


@dataclass(frozen=True, slots=True)
class OpenGpuShareArgs:
    """OpenGpuSharePluginCfg: GpuPluginCfg plus how Reserve picks devices — `best` (tightest fit),
    `worst`, `random`, or the name of a score plugin that places devices itself (FGDScore,
    DotProductScore with a dimExtMethod other than merge)."""

    gpu_sel_method: str = "best"
    dim_ext_method: str = "share"
    norm_method: str = "max"

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "args") -> OpenGpuShareArgs:
        raw = raw or {}
        try:
            check_known(dict(raw), ("gpuSelMethod", "dimExtMethod", "normMethod"))
            sel = get_str(dict(raw), "gpuSelMethod", "best")
            assert sel is not None
            if not sel:
                raise InputError("expected best, worst, random or the name of a score plugin", field="gpuSelMethod")
            return cls(sel, _choice(raw, "dimExtMethod", "share", DIM_EXT_METHODS),
                       _choice(raw, "normMethod", "max", NORM_METHODS))
        except InputError as e:
            raise e.located(field_prefix=field) from None
