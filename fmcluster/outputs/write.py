"""Writing an output file the user named (``--out``, ``--html``): never over the spec, never over a file fmcluster did
not write (or that changed since) unless ``--force``, never over anything but a regular file, and never half-written.

`claim` judges the path and is cheap: commands call it before their expensive step (planning, rendering, synthesis),
then `write`, which judges it again (something may have appeared meanwhile) and writes a temporary file in the same
directory, synced, renamed into place. A symlink is followed, as `synth --out` follows one: its target is written and
the link stays.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from fmcluster.outputs.marker import Style, sign, signed

# A file larger than this is not one fmcluster wrote (its largest outputs, plan pages and diagrams, are a few MB);
# it is not read to find out.
MAX_OWN_BYTES = 64 * 1024 * 1024


class OutputRefused(Exception):
    """The path may not be written: one line, exit 2."""


@dataclass(frozen=True)
class Output:
    """A path `claim` allowed: `given` as the user wrote it, `target` the file it names."""

    option: str
    given: str
    target: Path
    style: Style
    force: bool
    spec: Optional[str]
    mode: Optional[int]

    def refuse(self, why: str) -> OutputRefused:
        shown = re.sub(r"[\x00-\x1f\x7f]", lambda m: repr(m.group())[1:-1], self.given)  # one line, whatever the path
        return OutputRefused(f"{self.option} {shown}: {why}")


def _same_file(a: Path, b: str) -> bool:
    try:
        return a == Path(os.path.realpath(b)) or (a.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def is_own(path: Path) -> bool:
    """True when `path` is a regular file fmcluster wrote and nobody changed since."""
    try:  # non-blocking and not through a link: a pipe put there meanwhile must not hang the read
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_OWN_BYTES:
            return False
        try:
            return signed(f.read(MAX_OWN_BYTES + 1))
        except OSError:
            return False


def _judge(out: Output) -> bool:
    """Raise `OutputRefused` when `out` may not be written; True when its target exists (and may be replaced)."""
    if out.spec is not None and _same_file(out.target, out.spec):
        raise out.refuse(f"is the spec {out.spec}; write the output elsewhere (--force never replaces the spec)")
    if not out.target.parent.is_dir():
        raise out.refuse(f"{out.target.parent} is not a directory")
    try:
        mode = os.lstat(out.target).st_mode
    except FileNotFoundError:
        return False
    except OSError as e:
        raise out.refuse(f"cannot read it ({e.strerror or e})") from None
    if stat.S_ISDIR(mode):
        raise out.refuse("is a directory; name a file")
    if not stat.S_ISREG(mode):
        raise out.refuse("is not a regular file (a device, pipe or socket); name a file")
    if not out.force and not is_own(out.target):
        raise out.refuse("exists and fmcluster did not write it, or it changed since; --force replaces it")
    return True


def _link(tmp: Path, target: Path) -> None:
    """Put `tmp` at `target` only if nothing is there (a hard link fails on an existing name; a rename would not)."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links
        if os.path.lexists(target):
            raise FileExistsError(str(target)) from None
        os.replace(tmp, target)


def claim(path: str, option: str, style: Style, *, force: bool = False, spec: Optional[str] = None,
          mode: Optional[int] = None) -> Output:
    """Check that `path` may be written, before any work goes into what it will hold. `mode`: the file's permission
    bits (default: what the umask leaves of 0o666)."""
    out = Output(option, path, Path(os.path.realpath(path)), style, force, spec, mode)
    _judge(out)
    return out


def write(out: Output, data: bytes) -> None:
    """Write `data`, signed, to `out` whole or not at all."""
    exists = _judge(out)
    tmp = out.target.parent / f".{out.target.name}.{os.urandom(4).hex()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as f:
            if out.mode is not None:
                os.fchmod(f.fileno(), out.mode)
            f.write(sign(data, out.style))
            f.flush()
            os.fsync(f.fileno())
        if exists:
            os.replace(tmp, out.target)
        else:
            _link(tmp, out.target)
    except FileExistsError:
        raise out.refuse("appeared while fmcluster was writing; run again to judge it") from None
    except OSError as e:
        raise out.refuse(f"cannot write there ({e.strerror or e})") from None
    finally:
        if tmp.exists():
            tmp.unlink()


def emit(text: str, out: Optional[Output], shown: str) -> None:
    """A command's text to standard output, or (`--out`) written to its claimed file with one line on standard error
    naming it as the user wrote it (`shown`)."""
    if out is None:
        sys.stdout.write(text)
        return
    write(out, text.encode("utf-8"))
    print(f"wrote {shown}", file=sys.stderr)
