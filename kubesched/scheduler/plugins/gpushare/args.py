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

from kubesched.api import fields
from kubesched.config.plugin_args import PluginArgs

DIM_EXT_METHODS = ("merge", "share", "divide", "extend")
NORM_METHODS = ("node", "pod", "max")
GPU_SEL_BUILTIN = ("best", "worst", "random")


def _choice(a: fields.Fields, key: str, default: str, allowed: tuple[str, ...]) -> str:
    v: str = a.string(key, default)
    if v not in allowed:
        raise a.error(key, f"expected one of {', '.join(allowed)}, got {v!r}")
    return v


@dataclass(frozen=True, slots=True)
class GpuPolicyArgs(PluginArgs):
    """GpuPluginCfg: how a score plugin extends the GPU dimension and normalises resource vectors (one type
    for the six policies, as upstream)."""

    dim_ext_method: str = "share"
    norm_method: str = "max"

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> GpuPolicyArgs:
        a = fields.Fields(raw, field, allowed={"dimExtMethod", "normMethod"})
        return cls(_choice(a, "dimExtMethod", "share", DIM_EXT_METHODS),
                   _choice(a, "normMethod", "max", NORM_METHODS))


@dataclass(frozen=True, slots=True)
class OpenGpuShareArgs(PluginArgs):
    """OpenGpuSharePluginCfg: GpuPluginCfg plus how Reserve picks devices — `best` (tightest fit),
    `worst`, `random`, or the name of a score plugin that places devices itself (FGDScore,
    DotProductScore with a dimExtMethod other than merge)."""

    gpu_sel_method: str = "best"
    dim_ext_method: str = "share"
    norm_method: str = "max"

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> OpenGpuShareArgs:
        a = fields.Fields(raw, field, allowed={"gpuSelMethod", "dimExtMethod", "normMethod"})
        sel: str = a.string("gpuSelMethod", "best")
        if not sel:
            raise a.error("gpuSelMethod", "expected best, worst, random or the name of a score plugin")
        return cls(sel, _choice(a, "dimExtMethod", "share", DIM_EXT_METHODS),
                   _choice(a, "normMethod", "max", NORM_METHODS))
