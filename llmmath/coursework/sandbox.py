"""The sandbox each handed-in sheet runs in: Debian's bubblewrap (``bwrap``).

`command` gives the argument list that runs one grading notebook (see
`llmmath.coursework.grading`) under ``bwrap`` with

- a fresh, empty root: only the system's programs and libraries (``/usr``, ``/lib``,
  ...), a few files of ``/etc``, Python and its site-packages, and ``llmmath``'s own
  folder, all read-only; the teacher's home, the key, the other handed-in sheets and the
  repository are not there at all;
- its own temporary home and working directory on a small tmpfs (``/tmp``, 256 MiB);
- new user, PID, network, IPC and UTS namespaces: no network but loopback, no other
  process to see or signal, and the sandbox dies with the grader
  (``--die-with-parent``);
- the limits of `Limits`, set by the runner (`llmmath.coursework._runner`) before any of
  the student's code runs: address space, CPU seconds, file size; nbval's per-cell
  timeout; the grader kills the whole sandbox at the per-notebook timeout.

Where no user namespace can be made (some hardened kernels), a root grader still gets a
sandbox without one, with every capability dropped. Where bwrap is missing or cannot run
at all, `SandboxUnavailable` is raised, and grading refuses unless the teacher passes
``--unsafe`` (then the runner runs as the teacher, with a temporary home and working
folder and the same limits, but nothing else is hidden or read-only)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SHEET = "/tmp/work/sheet.ipynb"


class SandboxUnavailable(RuntimeError):
    """No sandbox can be made here; the message says why and what to do."""


@dataclass(frozen=True)
class Limits:
    """Per-sheet limits: ``cell_timeout`` and ``notebook_timeout`` in seconds (defaults
    60 and 600), ``memory_mb`` of address space per process, ``file_mb`` per written
    file."""

    cell_timeout: float = 60
    notebook_timeout: float = 600
    memory_mb: int = 4096
    file_mb: int = 64

    def __post_init__(self):
        for name in ("cell_timeout", "notebook_timeout", "memory_mb", "file_mb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not value > 0:
                raise ValueError(f"{name} must be positive; got {value!r}")

    def runner_args(self) -> list[str]:
        return [
            f"--cell-timeout={self.cell_timeout:g}",
            f"--cpu={int(self.notebook_timeout) + 5}",
            f"--memory-mb={self.memory_mb}",
            f"--file-mb={self.file_mb}",
        ]


def _read_only_paths() -> list[str]:
    """The system's and Python's folders the sheet needs, and llmmath's own."""
    import llmmath

    paths = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"]
    paths += [sys.base_prefix, sys.prefix, str(Path(llmmath.__file__).parent)]
    paths += [
        p
        for p in sys.path
        if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)
    ]
    keep: list[str] = []
    for p in sorted(
        {os.path.realpath(p) for p in paths if os.path.exists(p)}
        | {p for p in paths if os.path.exists(p)}
    ):
        if not any(p == k or p.startswith(k.rstrip("/") + "/") for k in keep):
            keep.append(p)
    return keep


ETC = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/alternatives",
    "/etc/ssl/certs",
    "/etc/matplotlibrc",
)


def _bwrap_args(userns: bool) -> list[str]:
    args = ["--die-with-parent", "--new-session", "--unshare-all"]
    args += ["--uid", "1000", "--gid", "1000"] if userns else ["--cap-drop", "ALL"]
    # The tmpfs first: a checkout or a venv under /tmp (a CI clone) is then bound on top
    # of it, read-only, instead of being hidden by it.
    args += ["--size", str(256 << 20), "--tmpfs", "/tmp"]
    args += ["--dir", "/tmp/home", "--dir", "/tmp/work"]
    for p in _read_only_paths():
        args += ["--ro-bind", p, p]
    for p in ETC:
        args += ["--ro-bind-try", p, p]
    args += ["--proc", "/proc", "--dev", "/dev", "--chdir", "/tmp/work"]
    args += ["--clearenv"]
    env = {
        "HOME": "/tmp/home",
        "TMPDIR": "/tmp",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "MPLBACKEND": "Agg",
    }
    for k, v in env.items():
        args += ["--setenv", k, v]
    return args


@functools.lru_cache(maxsize=1)
def _working_mode() -> bool:
    """True if bwrap works with a user namespace, False if only without (as root).

    Raises:
        SandboxUnavailable: bwrap is missing or fails both ways.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(
            "no sandbox: bubblewrap (bwrap) is not installed; install Debian's "
            "bubblewrap (make test does), or pass --unsafe to grade without a sandbox"
        )
    errors = []
    for userns in (True, False):
        if not userns and os.geteuid() != 0:
            continue
        try:
            run = subprocess.run(
                [bwrap, *_bwrap_args(userns), sys.executable, "-c", "pass"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            errors.append(str(e))
            continue
        if run.returncode == 0:
            return userns
        errors.append(run.stderr.strip().splitlines()[-1:] or ["failed"])
    raise SandboxUnavailable(
        f"no sandbox: bwrap cannot run here ({'; '.join(map(str, errors))}); "
        "pass --unsafe to grade without a sandbox"
    )


def command(
    sheet: Path,
    limits: Limits,
    *,
    unsafe: bool = False,
    hide: list[Path | None] = (),
    probe: bool = False,
) -> list[str]:
    """The argument list that runs the grading notebook ``sheet`` under ``limits``.

    ``hide``: files (the teacher's key) to cover with an empty file should they lie in a
    folder the sandbox shows. With ``probe`` only check that a sandbox can be made.

    Raises:
        SandboxUnavailable: without ``unsafe``, when no sandbox can be made.
    """
    runner = [sys.executable, "-m", "llmmath.coursework._runner"]
    if unsafe:
        return [*runner, str(sheet), *limits.runner_args()]
    userns = _working_mode()
    if probe:
        return []
    args = [shutil.which("bwrap"), *_bwrap_args(userns)]
    shown = _read_only_paths()
    for h in hide:
        if h is None:
            continue
        real = os.path.realpath(h)
        if os.path.exists(real) and any(
            real.startswith(k.rstrip("/") + "/") for k in shown
        ):
            args += ["--ro-bind", "/dev/null", real]
    args += ["--ro-bind", str(sheet), SHEET]
    return [*args, *runner, SHEET, *limits.runner_args()]
