"""The node under test: files read under --root and external commands run under a timeout with a kill.

Every command runs with a list argv (no shell), in its own session, under a timeout; on timeout the whole
process group is killed and output is capped. Identical commands asked by several checks run once (results are
shared). The probes (fmcluster.runtime.probes) parse what this module reads; the checks judge it.
"""

from __future__ import annotations

import errno
import glob as _glob
import os
import selectors
import shutil
import signal
import subprocess
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .rooted import READ_LIMIT, read_text, under


class ProbeError(Exception):
    """A probe could not give an answer (tool missing, hung, exited badly, output garbled)."""


def capture(fn: Callable[[], Any]) -> Tuple[str, Any]:
    """Run a probe for Ctx.memo: ("ok", its value) or ("err", its ProbeError), so a failure is shared too."""
    try:
        return ("ok", fn())
    except ProbeError as exc:
        return ("err", exc)


def unwrap(result: Tuple[str, Any]) -> Any:
    """The value captured by capture(), or its ProbeError raised again."""
    kind, value = result
    if kind == "err":
        raise ProbeError(str(value))
    return value


class CmdResult:
    __slots__ = ("argv", "rc", "stdout", "stderr", "duration", "error")

    def __init__(self, argv: Sequence[str], rc: Optional[int], stdout: str, stderr: str, duration: float,
                 error: Optional[str] = None) -> None:
        self.argv = list(argv)
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.duration = duration
        self.error = error  # None when the command ran to completion

    @property
    def ok(self) -> bool:
        return self.error is None and self.rc == 0

    def why(self) -> str:
        cmd = " ".join(self.argv)
        if self.error:
            return f"{cmd}: {self.error}"
        tail = (self.stderr.strip() or self.stdout.strip()).splitlines()[-1:] or [""]
        return f"{cmd}: exit {self.rc} {tail[0][:200]}".rstrip()

    def require(self) -> str:
        """stdout of a successful run, else raise ProbeError with the reason."""
        if not self.ok:
            raise ProbeError(self.why())
        return self.stdout


# What one command may print per stream. The tools' real answers are kilobytes (nvidia-smi -q of eight GPUs, topo -m,
# dcgmi diag); a tool printing past this is broken and is killed before it fills the node's memory.
MAX_OUTPUT_BYTES = 8 << 20


def run_command(argv: Sequence[str], timeout: float, env: Optional[Dict[str, str]] = None) -> CmdResult:
    """Run argv (found on PATH) under timeout seconds and MAX_OUTPUT_BYTES per stream; kill its process group when the
    time is up or it prints past the cap."""
    start = time.monotonic()
    exe = shutil.which(argv[0], path=(env or os.environ).get("PATH"))
    if exe is None:
        return CmdResult(argv, None, "", "", 0.0, "not found on PATH")
    if timeout <= 0:
        return CmdResult(argv, None, "", "", 0.0, "no time left before the overall deadline")
    try:
        proc = subprocess.Popen(  # noqa: S603 - list argv, no shell
            [exe, *argv[1:]], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, env=env,
        )
    except OSError as exc:
        return CmdResult(argv, None, "", "", time.monotonic() - start, f"cannot start: {exc.strerror or exc}")
    try:
        out, err, error = _collect(proc, start + timeout, MAX_OUTPUT_BYTES)
        if error is None:
            try:
                proc.wait(max(0.0, start + timeout - time.monotonic()))
            except subprocess.TimeoutExpired:
                error = "timed out"
        if error is not None:
            kill_group(proc)
            try:
                proc.wait(2)
            except subprocess.TimeoutExpired:
                pass
            if error == "timed out":
                error = f"timed out after {timeout:.1f}s (killed)"
            return CmdResult(argv, None, _text(out), _text(err), time.monotonic() - start, error)
        return CmdResult(argv, proc.returncode, _text(out), _text(err), time.monotonic() - start)
    finally:
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _collect(proc: subprocess.Popen, end: float, cap: int) -> Tuple[bytes, bytes, Optional[str]]:  # type: ignore[type-arg]
    """Read stdout and stderr until both end, the time `end` comes ("timed out") or one passes `cap` bytes."""
    streams = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}  # type: ignore[union-attr]
    error: Optional[str] = None
    with selectors.DefaultSelector() as sel:
        for fd in streams:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map() and error is None:
            left = end - time.monotonic()
            if left <= 0:
                error = "timed out"
                break
            for key, _ in sel.select(left):
                try:
                    chunk = os.read(key.fd, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                buf = streams[key.fd]
                buf += chunk[: cap - len(buf)]
                if len(buf) >= cap:
                    error = f"printed more than {cap >> 20 or cap} {'MiB' if cap >> 20 else 'bytes'} (killed)"
                    break
    out, err = streams.values()
    return bytes(out), bytes(err), error


def kill_group(proc: subprocess.Popen) -> None:  # type: ignore[type-arg]
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except OSError:
            pass


def _text(data: Optional[bytes]) -> str:
    return (data or b"").decode("utf-8", errors="replace")


class Node:
    """The node under test: its filesystem (prefixed by root) and its commands (on PATH)."""

    def __init__(self, root: str = "/", tool_timeout: float = 20.0, deadline: Optional[float] = None,
                 env: Optional[Dict[str, str]] = None) -> None:
        self.root = root or "/"
        self.tool_timeout = tool_timeout
        self.deadline = deadline  # time.monotonic() value, or None
        self.env = env
        self._lock = threading.Lock()
        self._cache: Dict[Tuple[str, ...], CmdResult] = {}
        self._pending: Dict[Tuple[str, ...], threading.Event] = {}
        self.calls: List[Tuple[str, ...]] = []

    # ---- files ---------------------------------------------------------------------------------------
    def path(self, p: str) -> str:
        return under(self.root, p)

    def read(self, p: str, limit: int = READ_LIMIT) -> str:
        """Text of a file; ProbeError when it cannot be read."""
        try:
            return read_text(self.root, p, limit)
        except OSError as exc:
            raise ProbeError(f"cannot read {p}: {exc.strerror or exc}") from exc

    def read_or(self, p: str, default: Optional[str] = None) -> Optional[str]:
        try:
            return self.read(p)
        except ProbeError:
            return default

    def read_bytes_nonblocking(self, p: str, limit: int = 16 << 20) -> str:
        """Read a file that may block at its end (/dev/kmsg): O_NONBLOCK, stop at EAGAIN or EOF."""
        try:
            fd = os.open(self.path(p), os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise ProbeError(f"cannot read {p}: {exc.strerror or exc}") from exc
        chunks: List[bytes] = []
        total = 0
        try:
            while total < limit:
                try:
                    chunk = os.read(fd, 65536)
                except OSError as exc:
                    if exc.errno == errno.EPIPE:  # record overwritten in the ring buffer: keep reading
                        continue
                    if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                        break
                    raise ProbeError(f"cannot read {p}: {exc.strerror or exc}") from exc
                if not chunk:
                    break
                chunks.append(chunk if chunk.endswith(b"\n") else chunk + b"\n")
                total += len(chunk)
        finally:
            os.close(fd)
        return b"".join(chunks).decode("utf-8", errors="replace")

    def exists(self, p: str) -> bool:
        return os.path.exists(self.path(p))

    def listdir(self, p: str) -> List[str]:
        try:
            return sorted(os.listdir(self.path(p)))
        except OSError:
            return []

    def glob(self, pattern: str) -> List[str]:
        """Paths (as on the node, without the root prefix) matching pattern."""
        prefix = self.path("/")
        found = sorted(_glob.glob(self.path(pattern)))
        if self.root in ("", "/"):
            return found
        return ["/" + f[len(prefix):].lstrip("/") for f in found]

    def link_name(self, p: str) -> Optional[str]:
        """Basename of a symlink's target (e.g. device/driver -> efa), or None."""
        try:
            return os.path.basename(os.readlink(self.path(p)))
        except OSError:
            return None

    # ---- commands ------------------------------------------------------------------------------------
    def remaining(self) -> float:
        if self.deadline is None:
            return float("inf")
        return self.deadline - time.monotonic()

    def run(self, argv: Sequence[str], timeout: Optional[float] = None, cache: bool = True) -> CmdResult:
        """Run a command once per validation (cached), bounded by tool timeout and the overall deadline."""
        key = tuple(argv)
        if cache:
            with self._lock:
                if key in self._cache:
                    return self._cache[key]
                event = self._pending.get(key)
                owner = event is None
                if owner:
                    event = self._pending[key] = threading.Event()
            if not owner:
                assert event is not None
                event.wait(max(0.0, min(self.remaining(), 3600.0)) + 1.0)
                with self._lock:
                    if key in self._cache:
                        return self._cache[key]
                return CmdResult(argv, None, "", "", 0.0, "shared run did not finish before the deadline")
        limit = min(timeout if timeout is not None else self.tool_timeout, self.remaining())
        with self._lock:
            self.calls.append(key)
        result = CmdResult(argv, None, "", "", 0.0, "did not run")
        try:
            result = run_command(argv, limit, self.env)
        except Exception as exc:  # noqa: BLE001 - MemoryError included: an answer for every check waiting on it
            result = CmdResult(argv, None, "", "", 0.0, f"could not run: {type(exc).__name__}: {exc}")
        finally:
            if cache:  # always release the checks waiting on this command
                with self._lock:
                    self._cache[key] = result
                    ev = self._pending.pop(key)
                ev.set()
        return result
