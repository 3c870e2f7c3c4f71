"""The benchmarks' machine line names the processor (bench/__main__.py, `cpu_model`): two vms of one name ran the
same day's back-test, the same instructions counted, in 55 s and 32 s, and only the processor told them apart."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.__main__ import cpu_model  # noqa: E402

X86 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
flags\t\t: fpu vme

processor\t: 1
model name\t: AMD EPYC 7B13
"""
ARM = """processor\t: 0
BogoMIPS\t: 50.00
CPU implementer\t: 0x41
"""


def test_the_model_name_is_read_from_cpuinfo(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(X86, encoding="utf-8")
    assert cpu_model(cpuinfo) == "AMD EPYC 7B13"


def test_without_a_model_name_or_a_file_platform_names_the_machine(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(ARM, encoding="utf-8")
    fallback = platform.processor() or platform.machine() or "an unknown processor"
    assert cpu_model(cpuinfo) == fallback
    assert cpu_model(tmp_path / "missing") == fallback
