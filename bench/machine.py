"""What a benchmark ran on, and how busy the machine was (figures from a shared machine
mean little without the load next to them)."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path


def load_average() -> tuple[float, float, float]:
    """The 1, 5 and 15 minute load averages (zeros where the OS does not say)."""
    try:
        return os.getloadavg()
    except OSError:
        return (0.0, 0.0, 0.0)


def load_text() -> str:
    one, five, fifteen = load_average()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / (1024 * 1024)
    except OSError:
        return None
    return None


@dataclass(frozen=True)
class Machine:
    cpu: str
    cores: int
    memory_gib: float | None
    python: str
    system: str

    def describe(self) -> str:
        mem = f", {self.memory_gib:.0f} GiB" if self.memory_gib else ""
        return f"{self.cores} x {self.cpu}{mem}; {self.system}; Python {self.python}"


def this_machine() -> Machine:
    return Machine(
        cpu=_cpu_model(),
        cores=os.cpu_count() or 1,
        memory_gib=_memory_gib(),
        python=platform.python_version(),
        system=f"{platform.system()} {platform.release()}",
    )


def rss_mib(pid: int) -> float | None:
    """Resident set size of a process in MiB, from /proc (Linux); None elsewhere."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def cpu_seconds(pid: int, *, system_only: bool = False) -> float | None:
    """User + system CPU time a process has used so far (Linux /proc); None elsewhere.

    ``system_only``: the kernel's share alone (system calls: socket sends and receives).
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After the command name: state is field 3, utime 14 and stime 15 (1-based).
    ticks = int(fields[12]) if system_only else int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def engine_pid(engine: str) -> int | None:
    """The pid of a node started by tests/engines/engines.py (its state file), if any."""
    import json

    home = Path(os.environ.get("A2M_ENGINES_HOME", Path.home() / ".cache" / "a2m-engines"))
    try:
        state = json.loads((home / "state.json").read_text())
        pid = int(state[engine]["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pid if Path(f"/proc/{pid}").exists() else None
