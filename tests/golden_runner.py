"""Run check.py over fixture files in parallel chunks (one per core) and add up the results.

check.py starts one CLI process per fixture; with several hundred fixtures that is the suite's longest
part, so the chunks run side by side.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CHECK = Path(__file__).parent / "golden" / "check.py"
_SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$")


@dataclass
class Result:
    passed: int
    failed: int
    output: str


def run_fixtures(files: list[Path], workers: int | None = None) -> Result:
    workers = max(1, min(workers or os.cpu_count() or 1, 4, len(files)))
    chunks = [files[i::workers] for i in range(workers)]
    cmd = [sys.executable, str(CHECK), "--kubesched", f"{sys.executable} -m kubesched"]
    procs = [subprocess.Popen(cmd + [str(f) for f in chunk], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for chunk in chunks if chunk]
    passed = failed = 0
    out = []
    for p in procs:
        text, _ = p.communicate(timeout=1800)
        out.append(text)
        lines = text.strip().splitlines()
        m = _SUMMARY.match(lines[-1]) if lines else None
        if m is None:
            failed += 1  # a chunk that did not finish counts as a failure
            continue
        passed += int(m.group(1))
        failed += int(m.group(2))
    return Result(passed, failed, "".join(out))
