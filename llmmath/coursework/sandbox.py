"""The sandbox each handed-in sheet runs in: Debian's bubblewrap (``bwrap``), run as an
unprivileged user, inside one cgroup per sheet.

`launch` starts one grading run (see `llmmath.coursework.grading`): the runner
(`llmmath.coursework._runner`) reads the grading notebook from a pipe of its own and
runs it with nbval, writing its records to another (`Launch`). The student's code gets

- **an unprivileged user in its own user namespace**: uid and gid 1000 inside, mapped to
  the grader's own uid, or to ``nobody`` (65534) when the grader is root; no
  capabilities; no new namespaces (``--disable-userns``); ``/proc/sys`` and ``/dev``
  read-only;
- **a fresh, empty root**: only the system's programs and libraries (``/usr``, ...), a
  few files of ``/etc``, Python and its site-packages, and ``llmmath``'s own folder, all
  read-only; the teacher's home, the key, the other handed-in sheets and the repository
  are not there at all (a key inside a shown folder is covered, after every mount that
  could show it again: `_covers`);
- its own home and working directory on a sized tmpfs (``/tmp``), and a sized
  ``/dev/shm``;
- new PID, network, IPC and UTS namespaces: no network but loopback, no other process
  to see or signal, and the sandbox dies with the grader (``--die-with-parent``);
- **a seccomp filter** (`seccomp_program`, built by libseccomp) on every process of
  the sandbox, bwrap's init included: no ``ptrace``, ``process_vm_readv`` or
  ``process_vm_writev`` (and a few kernel interfaces no sheet needs), so no process
  of the sheet can stop, trace or read another, the init that runs as the grader's
  own user when the grader is not root among them;
- **the runner's channels out of its reach**: the notebook and the records travel on
  two pipes that only the runner holds inside the sandbox (bwrap's init closes every
  other descriptor, and its standard input and output are ``/dev/null``), and the
  runner is undumpable, so ``/proc/<pid>/fd`` opens neither;
- **limits held from outside** (`Launch.communicate`): the grader stops the sandbox
  when the notebook's time runs out, when the runner is stopped (a sheet's
  ``SIGSTOP``) or sends nothing for longer than a cell may take, and ends it by
  killing its init through a pidfd (bwrap's ``--info-fd`` names it), which ends every
  process of its PID namespace, whatever session they moved to; no wait of the
  grader's is unbounded;
- **one memory limit and one process-count limit for all of the sheet's processes**: a
  cgroup per sheet (cgroup v2 ``memory.max`` and ``pids.max``, or v1's
  ``memory.limit_in_bytes`` and ``pids.max``) wherever the machine lets the grader make
  one (`cgroup_support`); its tmpfs pages count against it too. Where it does not, the
  runner's per-process limits remain (`Limits`: address space, CPU seconds, file size,
  and ``RLIMIT_NPROC`` on the sandbox's user).

A root grader cannot hand bwrap an unprivileged user directly (paths such as a Python
under ``/root`` would be out of its reach), so it runs bwrap twice: an outer one, as
root with only ``CAP_SETUID`` and ``CAP_SETGID``, binds the read-only paths; a few lines
of Python drop to ``nobody``; an inner bwrap, unprivileged, makes the user namespace and
everything the student's code sees. Where no user namespace can be made, or bwrap or
libseccomp is missing, `SandboxUnavailable` is raised, and grading refuses unless the
teacher passes ``--unsafe`` (then the runner runs as the teacher, with a temporary home
and working folder and the same per-process limits, but nothing else is hidden or
read-only)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

SHEET = "sheet.ipynb"  # in the working folder: /tmp/work in the sandbox
#: The student's uid and gid inside the sandbox, and the host user a root grader runs
#: the sandbox as.
SANDBOX_UID, NOBODY = 1000, 65534


class SandboxUnavailable(RuntimeError):
    """No sandbox can be made here; the message says why and what to do."""


@dataclass(frozen=True)
class Limits:
    """Per-sheet limits: ``cell_timeout`` and ``notebook_timeout`` in seconds (defaults
    60 and 600); ``memory_mb`` for all of a sheet's processes together (a cgroup) and
    as each process's address space; ``file_mb`` per written file; ``processes``
    (processes and threads) at once. ``/tmp`` gets a quarter of ``memory_mb`` and
    ``/dev/shm`` an eighth (at least 16 MiB each), inside the memory limit."""

    cell_timeout: float = 60
    notebook_timeout: float = 600
    memory_mb: int = 4096
    file_mb: int = 64
    processes: int = 256

    def __post_init__(self):
        for name in (
            "cell_timeout",
            "notebook_timeout",
            "memory_mb",
            "file_mb",
            "processes",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not value > 0:
                raise ValueError(f"{name} must be positive; got {value!r}")

    @property
    def tmp_mb(self) -> int:
        """The size of the sandbox's ``/tmp`` (home and working folder), MiB."""
        return max(16, self.memory_mb // 4)

    @property
    def shm_mb(self) -> int:
        """The size of the sandbox's ``/dev/shm``, MiB."""
        return max(16, self.memory_mb // 8)

    def runner_args(self, cgroup: bool = False) -> list[str]:
        """The runner's options that carry these limits. Each process's address space
        is ``memory_mb``; with a ``cgroup`` that holds the sheet to ``memory_mb``,
        twice that (at least ``memory_mb`` + 1 GiB), since threads and libraries
        reserve far more address space than they use."""
        address = max(2 * self.memory_mb, self.memory_mb + 1024) if cgroup else None
        return [
            f"--cell-timeout={self.cell_timeout:g}",
            f"--cpu={int(self.notebook_timeout) + 5}",
            f"--memory-mb={address or self.memory_mb}",
            f"--file-mb={self.file_mb}",
            f"--processes={self.processes}",
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

ENV = {
    "HOME": "/tmp/home",
    "TMPDIR": "/tmp",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONNOUSERSITE": "1",
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    "MPLBACKEND": "Agg",
}


def _binds() -> list[str]:
    """bwrap arguments that show the read-only paths (their parents made 0755, so the
    unprivileged user can reach them)."""
    args: list[str] = []
    made: set[str] = {"/"}
    for p in [*_read_only_paths(), *(e for e in ETC if os.path.lexists(e))]:
        parents = [str(a) for a in reversed(Path(p).parents) if str(a) not in made]
        for a in parents:
            args += ["--perms", "0755", "--dir", a]
            made.add(a)
        if os.path.islink(p) and p in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
            args += ["--symlink", os.readlink(p), p]
        else:
            args += ["--ro-bind-try" if p in ETC else "--ro-bind", p, p]
        made.add(p)
    return args


def _covers(hide: list[Path | None], reachable_only: bool = False) -> list[str]:
    """bwrap arguments that cover each file of ``hide`` (the key) with ``/dev/null``
    (mounted without devices, so that opening it fails), should it lie in a folder the
    sandbox shows. They come last, after every mount
    that could show the file again (the tmpfs over ``/tmp`` and the binds after it).
    ``reachable_only``: only the files any user can reach (for the inner bwrap of a
    root grader, which runs as ``nobody``: bwrap must find a file to cover it, and one
    ``nobody`` cannot reach is hidden already)."""
    shown = [*_read_only_paths(), *ETC]
    args: list[str] = []
    for h in hide:
        if h is None:
            continue
        real = os.path.realpath(h)
        if not (
            os.path.isfile(real)
            and any(real.startswith(k.rstrip("/") + "/") for k in shown)
        ):
            continue
        if reachable_only and not all(
            os.stat(d).st_mode & stat.S_IXOTH for d in Path(real).parents
        ):
            continue
        args += ["--ro-bind", "/dev/null", real]
    return args


def _inner_args(limits: Limits, binds: list[str], covers: list[str]) -> list[str]:
    """The unprivileged bwrap's arguments: the user namespace and what the student's
    code sees; ``covers`` (`_covers`) after every mount."""
    args = ["--die-with-parent", "--new-session", "--unshare-all", "--unshare-user"]
    args += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    args += ["--disable-userns", "--cap-drop", "ALL"]
    args += binds
    args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"]
    args += ["--dev", "/dev", "--size", str(limits.shm_mb << 20), "--tmpfs", "/dev/shm"]
    args += ["--remount-ro", "/dev"]
    # The tmpfs over /tmp, then binds again: a checkout or a venv under /tmp (a CI
    # clone) stays visible, read-only, instead of being hidden by it.
    args += ["--size", str(limits.tmp_mb << 20), "--tmpfs", "/tmp"]
    under_tmp = [p for p in _read_only_paths() if p.startswith("/tmp/")]
    for p in under_tmp:
        args += ["--ro-bind", p, p]
    args += ["--dir", "/tmp/home", "--dir", "/tmp/work", "--chdir", "/tmp/work"]
    args += covers
    args += ["--clearenv"]
    for k, v in ENV.items():
        args += ["--setenv", k, v]
    return args


#: Run by the outer (root) bwrap: drop to ``nobody`` and exec the inner bwrap.
DROP = (
    "import os, sys\n"
    f"os.setgroups([]); os.setgid({NOBODY}); os.setuid({NOBODY})\n"
    "os.execv(sys.argv[1], sys.argv[1:])"
)
#: Run by the grader's child: join the sheet's cgroups, then exec the sandbox.
ENTER = (
    "import os, sys\n"
    "a = sys.argv[1:]; i = a.index('--')\n"
    "for p in a[:i]:\n"
    "    with open(p, 'w') as f: f.write(str(os.getpid()))\n"
    "os.execv(a[i + 1], a[i + 1 :])"
)


def _as_root() -> bool:
    return os.geteuid() == 0


def _sandbox_args(
    limits: Limits,
    hide: list[Path | None],
    inner_cmd: list[str],
    seccomp_fd: int | None = None,
    info_fd: int | None = None,
) -> list[str]:
    """bwrap's command line. ``seccomp_fd``: a descriptor holding the BPF program of
    `seccomp_program`, loaded for every process of the sandbox (bwrap's init
    included); ``info_fd``: where bwrap writes the host PID of the sandbox's init, the
    process whose death ends every process of the sandbox."""
    bwrap = shutil.which("bwrap")
    seccomp = ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
    info = ["--info-fd", str(info_fd)] if info_fd is not None else []
    if not _as_root():
        inner = _inner_args(limits, _binds(), _covers(hide))
        return [bwrap, *info, *seccomp, *inner, *inner_cmd]
    outer = ["--die-with-parent", "--new-session", "--unshare-ipc", "--unshare-pid"]
    outer += ["--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    outer += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    outer += _binds() + _covers(hide)
    # The host's /proc, writable, only for the inner bwrap: the user namespace's maps
    # are written there and a new proc can be mounted only where one is fully
    # visible. The inner bwrap covers it with the sandbox's own.
    outer += ["--bind", "/proc", "/proc", "--dev", "/dev", "--dir", "/tmp"]
    outer += ["--clearenv", "--setenv", "PATH", ENV["PATH"]]
    inner = ["--ro-bind", "/", "/"]
    return [
        bwrap,
        *info,
        *outer,
        sys.executable,
        "-I",
        "-S",
        "-c",
        DROP,
        "/usr/bin/bwrap" if bwrap.startswith("/usr/") else bwrap,
        *seccomp,
        *_inner_args(limits, inner, _covers(hide, reachable_only=True)),
        *inner_cmd,
    ]


#: The system calls a sheet's processes may not make; each fails with EPERM. Those
#: that read or write another process (``ptrace``, ``process_vm_readv``, ...: a
#: sheet's process could otherwise stop bwrap's init, which runs as the same user
#: when the grader is not root, or read the runner), and kernel interfaces no sheet
#: needs, often used to attack the kernel itself.
DENIED_SYSCALLS = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "process_madvise",
    "pidfd_getfd",
    "kcmp",
    "perf_event_open",
    "bpf",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
)
#: Those without which there is no sandbox.
REQUIRED_DENIALS = ("ptrace", "process_vm_readv", "process_vm_writev")


@functools.lru_cache(maxsize=1)
def seccomp_program() -> bytes:
    """The seccomp filter of every sheet, as a BPF program for bwrap's ``--seccomp``:
    `DENIED_SYSCALLS` fail with EPERM, everything else is allowed, and a system call
    of another architecture (i386 calls from an x86-64 process) kills the caller.
    Built by libseccomp (Debian's ``libseccomp2``), through its Python binding or the
    ctypes one, ``pyseccomp`` (requirements/dev.txt).

    Raises:
        SandboxUnavailable: libseccomp or its binding is missing.
    """
    import errno
    import tempfile

    try:
        try:
            import seccomp  # libseccomp's own binding (Debian's python3-seccomp)
        except ImportError:
            import pyseccomp as seccomp
        rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
        for name in DENIED_SYSCALLS:
            try:
                rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
            except (OSError, ValueError, RuntimeError):
                if name in REQUIRED_DENIALS:
                    raise
        with tempfile.TemporaryFile() as f:
            rules.export_bpf(f)
            f.seek(0)
            return f.read()
    except (ImportError, OSError, ValueError, RuntimeError, AttributeError) as e:
        raise SandboxUnavailable(
            f"no sandbox: no seccomp filter can be built here ({type(e).__name__}: "
            f"{e}); install Debian's libseccomp2 (make sandbox does) and pyseccomp "
            "(make setup does), or pass --unsafe to grade without a sandbox"
        ) from None


def _program_fd() -> int:
    """A pipe's read end holding `seccomp_program` (bwrap reads it to its end)."""
    program = seccomp_program()
    read, write = os.pipe()
    try:
        os.write(write, program)  # a few hundred bytes: far below a pipe's buffer
    finally:
        os.close(write)
    return read


def command(
    limits: Limits,
    *,
    unsafe: bool = False,
    hide: list[Path | None] = (),
    check: bool = False,
    cgroup: bool = False,
    channels: tuple[int, int] | None = None,
    seccomp_fd: int | None = None,
    info_fd: int | None = None,
) -> list[str]:
    """The argument list that runs the runner under ``limits``; with ``check``, the
    runner's pre-flight only.

    ``hide``: files (the teacher's key) to cover (`_covers`) should they lie in a
    folder the sandbox shows. ``cgroup``: the sheet runs in its own cgroup.
    ``channels``: the descriptors the runner reads the grading notebook from and
    writes its records to (see `launch`); ``seccomp_fd`` and ``info_fd``: see
    `_sandbox_args`.

    Raises:
        SandboxUnavailable: without ``unsafe``, when no sandbox can be made.
    """
    runner = [sys.executable, "-m", "llmmath.coursework._runner"]
    if check:
        runner += ["--check"]
    else:
        runner += [SHEET, *limits.runner_args(cgroup)]
        if channels is not None:
            runner += [f"--input-fd={channels[0]}", f"--records-fd={channels[1]}"]
    if unsafe:
        return runner
    _working()
    return _sandbox_args(limits, list(hide), runner, seccomp_fd, info_fd)


@functools.lru_cache(maxsize=1)
def _working() -> None:
    """Check once that bwrap can make the sandbox here, seccomp filter included.

    Raises:
        SandboxUnavailable: bwrap or libseccomp is missing, or bwrap fails.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(
            "no sandbox: bubblewrap (bwrap) is not installed; install Debian's "
            "bubblewrap (make test does), or pass --unsafe to grade without a sandbox"
        )
    program = _program_fd()
    try:
        run = subprocess.run(
            _sandbox_args(Limits(), [], ["/bin/true"], seccomp_fd=program),
            capture_output=True,
            text=True,
            timeout=30,
            pass_fds=(program,),
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SandboxUnavailable(f"no sandbox: bwrap cannot run here ({e})") from None
    finally:
        os.close(program)
    if run.returncode != 0:
        why = (run.stderr.strip().splitlines() or ["failed"])[-1]
        raise SandboxUnavailable(
            f"no sandbox: bwrap cannot make an unprivileged user namespace here "
            f"({why}); allow unprivileged user namespaces (sysctl "
            "user.max_user_namespaces, kernel.unprivileged_userns_clone), or pass "
            "--unsafe to grade without a sandbox"
        )


# --- One cgroup per sheet ------------------------------------------------------------


def _mountinfo() -> list[tuple[str, str, set[str]]]:
    """(mount point, file system type, super options) of every cgroup mount."""
    mounts = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            mounts.append((fields[4], tail[0], set(tail[2].split(","))))
    return mounts


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path by hierarchy: ``""`` for v2, else the controllers."""
    paths = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            paths[controllers] = path
    return paths


@dataclass
class Cgroup:
    """A sheet's cgroup: one folder per hierarchy (v2: one; v1: memory and pids)."""

    version: int
    folders: list[Path] = field(default_factory=list)

    def procs(self) -> list[str]:
        """The ``cgroup.procs`` files a process joins by writing its PID."""
        return [str(f / "cgroup.procs") for f in self.folders]

    def hit(self) -> list[str]:
        """The limits the sheet's processes ran into: ``"memory"`` (a process killed
        or an allocation refused) and ``"processes"``."""
        hit = []
        for f in self.folders:
            for name, kind in (
                ("memory.events", "memory"),
                ("memory.failcnt", "memory"),
                ("pids.events", "processes"),
            ):
                try:
                    text = (f / name).read_text()
                except OSError:
                    continue
                counts = [int(w) for w in text.split() if w.isdigit()]
                if name == "memory.events":
                    counts = [
                        int(v)
                        for k, _, v in (ln.partition(" ") for ln in text.splitlines())
                        if k in ("max", "oom_kill") and v.isdigit()
                    ]
                if any(counts) and kind not in hit:
                    hit.append(kind)
        return hit

    def close(self) -> None:
        """Kill whatever is left in it and remove it."""
        for f in self.folders:
            with contextlib.suppress(OSError):
                (f / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + 5
        for f in self.folders:
            while True:
                try:
                    pids = (f / "cgroup.procs").read_text().split()
                except OSError:
                    break
                if not pids or time.monotonic() > deadline:
                    break
                for pid in pids:
                    with contextlib.suppress(OSError, ValueError):
                        os.kill(int(pid), signal.SIGKILL)
                time.sleep(0.02)
            with contextlib.suppress(OSError):
                f.rmdir()


def _make_cgroup(limits: Limits, parents: dict[str, Path], version: int) -> Cgroup:
    name = f"llmmath-grade-{uuid.uuid4().hex[:12]}"
    group = Cgroup(version)
    try:
        for kind, parent in parents.items():
            folder = parent / name
            folder.mkdir()
            group.folders.append(folder)
            if version == 2:
                (folder / "memory.max").write_text(str(limits.memory_mb << 20))
                with contextlib.suppress(OSError):
                    (folder / "memory.swap.max").write_text("0")
                (folder / "pids.max").write_text(str(limits.processes))
            elif kind == "memory":
                (folder / "memory.limit_in_bytes").write_text(
                    str(limits.memory_mb << 20)
                )
                with contextlib.suppress(OSError):
                    (folder / "memory.memsw.limit_in_bytes").write_text(
                        str(limits.memory_mb << 20)
                    )
            else:
                (folder / "pids.max").write_text(str(limits.processes))
    except OSError:
        group.close()
        raise
    return group


@functools.lru_cache(maxsize=1)
def _cgroup_parents() -> tuple[int, dict[str, Path]] | None:
    """Where this machine lets the grader make a sheet's cgroups: (version, parent
    folder by hierarchy), or None."""
    mounts, own = _mountinfo(), _own_cgroups()
    v1 = {}
    for point, fstype, opts in mounts:
        if fstype == "cgroup2" and "" in own:
            parent = Path(point) / own[""].lstrip("/")
            try:
                want = {"memory", "pids"}
                if want <= set((parent / "cgroup.controllers").read_text().split()):
                    control = parent / "cgroup.subtree_control"
                    if not want <= set(control.read_text().split()):
                        control.write_text("+memory +pids")
                    return 2, {"": parent}
            except OSError:
                pass
        elif fstype == "cgroup":
            for kind in ("memory", "pids"):
                if kind in opts:
                    path = [p for c, p in own.items() if kind in c.split(",")]
                    v1[kind] = Path(point) / (path or ["/"])[0].lstrip("/")
    if set(v1) == {"memory", "pids"}:
        return 1, v1
    return None


def cgroup_support() -> str | None:
    """``"cgroup v2"`` or ``"cgroup v1"`` where the grader can give each sheet its own
    memory and process-count limits; None where it cannot (then only the per-process
    limits hold)."""
    found = _cgroup_parents()
    if found is None:
        return None
    try:
        _make_cgroup(Limits(), found[1], found[0]).close()
    except OSError:
        return None
    return f"cgroup v{found[0]}"


@dataclass
class Outcome:
    """How a run ended (`Launch.communicate`): what the runner wrote on its records
    channel (at most ``cap`` bytes), why it was stopped (None: it ended by itself;
    ``"timeout"``, ``"quiet"`` or ``"frozen"``), and the seconds it took."""

    output: bytes
    stopped: str | None
    seconds: float


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent PID, start time) of process ``pid``, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    try:
        return fields[0], int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _children(pid: int) -> list[int]:
    """The PIDs of ``pid``'s children, oldest first (from ``/proc/PID/task/*/children``,
    or where the kernel has none, from every process's parent)."""
    kids: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            text = Path(f"/proc/{pid}/task/{task}/children").read_text()
            kids += [int(k) for k in text.split()]
    except FileNotFoundError:
        if not os.path.isdir(f"/proc/{pid}"):
            return []
        kids = [
            int(k)
            for k in os.listdir("/proc")
            if k.isdigit() and (s := _stat(int(k))) is not None and s[1] == pid
        ]
    except (OSError, ValueError):
        return []
    started = {k: s[2] for k in kids if (s := _stat(k)) is not None}
    return sorted(started, key=lambda k: (started[k], k))


@dataclass
class Launch:
    """A started sandbox: the process (bubblewrap's monitor, outside the sandbox), its
    cgroup (None where there is none), and the grader's ends of the runner's
    channels: ``input`` (the runner reads the grading notebook from it) and
    ``records`` (the runner writes its records to it). No other process of the
    sandbox holds either: bwrap's init closes every descriptor but 0, 1 and 2 (which
    are ``/dev/null``), and the runner, undumpable, keeps them from its kernel.

    ``info`` is where bwrap writes the host PID of the sandbox's init; killing that
    one process ends every process of the sandbox (its PID namespace), whatever
    session or process group they are in. ``depth``: the runner's generation below
    that init (3 for a root grader: the outer init, the inner bwrap, its init)."""

    process: subprocess.Popen
    cgroup: Cgroup | None
    input: int | None = None
    records: int | None = None
    info: int | None = None
    depth: int = 1
    init: int | None = None
    pidfd: int | None = None
    runner: int | None = None
    _info_text: bytearray = field(default_factory=bytearray)

    def _read_info(self) -> bool:
        """Read bwrap's info; at its end, find the sandbox's init. False at the end."""
        try:
            block = os.read(self.info, 4096)
        except BlockingIOError:
            return True
        except OSError:
            block = b""
        if block:
            self._info_text += block[: 65536 - len(self._info_text)]
            return True
        try:
            pid = json.loads(self._info_text.decode())["child-pid"]
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return False
        if not isinstance(pid, int) or pid <= 1:
            return False
        try:
            pidfd = os.pidfd_open(pid)
        except (OSError, AttributeError):
            pidfd = None
        # The PID is the init's only while bwrap's monitor, our child, is its parent
        # (the monitor has not reaped it, so the PID cannot have been reused).
        found = _stat(pid)
        if found is None or found[1] != self.process.pid:
            if pidfd is not None:
                os.close(pidfd)
            return False
        self.init, self.pidfd = pid, pidfd
        return False

    def _runner_stopped(self) -> bool:
        """Whether the runner is stopped (SIGSTOP from one of the sheet's processes)."""
        if self.runner is None:
            pid = self.init if self.info is not None else self.process.pid
            for _ in range(self.depth if self.info is not None else 0):
                kids = _children(pid) if pid is not None else []
                pid = kids[0] if kids else None
            self.runner = pid
        found = _stat(self.runner) if self.runner is not None else None
        return found is not None and found[0] in ("T", "t")

    def communicate(
        self,
        data: bytes,
        *,
        timeout: float,
        quiet: float | None = None,
        cap: int = 16 << 20,
    ) -> Outcome:
        """Write ``data`` to the runner and read its records until it ends, or
        return early (for the caller to `close` the sandbox) when it runs past
        ``timeout`` seconds, sends nothing for ``quiet`` seconds once it has begun to
        send, or its runner stays stopped for a second (a sheet's
        ``os.kill(os.getppid(), SIGSTOP)``). All waiting is done here, within those
        limits: nothing the sandbox's processes do can make it wait longer."""
        start = time.monotonic()
        pending = memoryview(data)
        kept = bytearray()
        stopped = None
        last = frozen = None
        look = start + 0.5
        sel = selectors.DefaultSelector()
        for fd, event, name in (
            (self.input, selectors.EVENT_WRITE, "input"),
            (self.records, selectors.EVENT_READ, "records"),
            (self.info, selectors.EVENT_READ, "info"),
        ):
            if fd is not None:
                os.set_blocking(fd, False)
                sel.register(fd, event, name)
        try:
            while True:
                now = time.monotonic()
                if now - start >= timeout:
                    stopped = "timeout"
                    break
                if quiet is not None and last is not None and now - last >= quiet:
                    stopped = "quiet"
                    break
                if now >= look:
                    look = now + 0.25
                    if not self._runner_stopped():
                        frozen = None
                    elif frozen is None:
                        frozen = now
                    elif now - frozen >= 1:
                        stopped = "frozen"
                        break
                names = {k.data for k in sel.get_map().values()}
                if "records" not in names and self.process.poll() is not None:
                    break
                if not names - {"input"} and "records" not in names:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self.process.wait(timeout=0.2)
                    continue
                for key, _ in sel.select(timeout=0.2):
                    if key.data == "input":
                        try:
                            pending = pending[os.write(key.fd, pending[: 1 << 16]) :]
                        except BlockingIOError:
                            continue
                        except OSError:
                            pending = pending[:0]
                        if not pending:
                            sel.unregister(key.fd)
                            os.close(key.fd)
                            self.input = None
                    elif key.data == "records":
                        try:
                            block = os.read(key.fd, 1 << 16)
                        except BlockingIOError:
                            continue
                        except OSError:
                            block = b""
                        if not block:
                            sel.unregister(key.fd)
                            continue
                        last = time.monotonic()
                        kept += block[: max(0, cap - len(kept))]
                    elif not self._read_info():
                        sel.unregister(key.fd)
        finally:
            sel.close()
        return Outcome(bytes(kept), stopped, time.monotonic() - start)

    def close(self) -> None:
        """Kill every process of the sandbox (its init, then bwrap's monitor), wait
        for the monitor, a few seconds at most, remove the cgroup and close the
        channels."""
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        elif self.init is not None:
            with contextlib.suppress(OSError):
                os.kill(self.init, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        if self.cgroup is not None:
            self.cgroup.close()
        for name in ("input", "records", "info", "pidfd"):
            fd = getattr(self, name)
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
                setattr(self, name, None)


def launch(
    limits: Limits,
    *,
    unsafe: bool = False,
    hide: list[Path | None] = (),
    check: bool = False,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    stderr: int = subprocess.DEVNULL,
) -> Launch:
    """Start the runner in a sandbox (see the module's docstring), in its own
    session, with its standard input and output on ``/dev/null`` and its two
    channels (`Launch`) on pipes of their own; with ``check``, the pre-flight (no
    channels).

    Raises:
        SandboxUnavailable: without ``unsafe``, when no sandbox can be made.
    """
    group = None
    if not unsafe and cgroup_support():
        version, parents = _cgroup_parents()
        with contextlib.suppress(OSError):
            group = _make_cgroup(limits, parents, version)
    mine: list[int] = []  # the grader's ends
    theirs: list[int] = []  # the sandbox's ends, closed here once it has them
    try:
        channels = None
        if not check:
            into, input_ = os.pipe()
            records, out = os.pipe()
            mine += [input_, records]
            theirs += [into, out]
            channels = (into, out)
        seccomp_fd = info_fd = None
        if not unsafe:
            seccomp_fd = _program_fd()
            theirs.append(seccomp_fd)
            info, info_fd = os.pipe()
            mine.append(info)
            theirs.append(info_fd)
        args = command(
            limits,
            unsafe=unsafe,
            hide=hide,
            check=check,
            cgroup=group is not None,
            channels=channels,
            seccomp_fd=seccomp_fd,
            info_fd=info_fd,
        )
        if group is not None:
            args = [
                sys.executable,
                "-I",
                "-S",
                "-c",
                ENTER,
                *group.procs(),
                "--",
            ] + args
        process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            cwd=cwd,
            env=env,
            start_new_session=True,
            pass_fds=theirs,
        )
    except BaseException:
        for fd in mine:
            os.close(fd)
        if group is not None:
            group.close()
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    started = Launch(process, group, depth=3 if _as_root() else 1)
    if not check:
        started.input, started.records = mine[0], mine[1]
    if not unsafe:
        started.info = mine[-1]
    return started
