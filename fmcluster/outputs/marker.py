"""How fmcluster signs a file it writes, and knows it again: one comment line (a PNG text chunk in a PNG) holding the
sha256 of the rest of the file. A file whose mark holds is fmcluster's output as written; one without a mark, or whose
rest changed since (someone edited it), is not, and stays unless the user says --force.

Each format takes the line in its own comment syntax, so the file still means what it did: ``#`` (shell, YAML),
``<!-- -->`` (HTML, SVG), ``//`` (Graphviz DOT), a first key in a JSON object, a ``tEXt`` chunk after a PNG's header
(PNG specification, 11.3.4.3). A PDF has no such place that every reader accepts, so it is written unsigned.
"""

from __future__ import annotations

import hashlib
import re
import struct
import zlib
from dataclasses import dataclass
from typing import List, Optional, Tuple, Union

MARK = b"fmcluster-output sha256="
_MARK_LINE = re.compile(rb"fmcluster-output sha256=([0-9a-f]{64})")
_NOTE = b": written by fmcluster, which replaces it only while nobody has changed it"  # no "--": XML comments
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_KEYWORD = b"fmcluster-output\x00"


@dataclass(frozen=True)
class Comment:
    """A line comment: `prefix` MARK `suffix`, after the first line when that line starts with one of `after`."""

    prefix: bytes
    suffix: bytes = b""
    after: Tuple[bytes, ...] = ()


HASH = Comment(b"# ", after=(b"#!",))  # shell scripts (after the #! line) and YAML
XML = Comment(b"<!-- ", b" -->", after=(b"<?xml", b"<!doctype"))  # SVG and HTML (after the declaration)
DOT = Comment(b"// ")
JSON = Comment(b'  "fmcluster": "', b'",', after=(b"{",))  # the first key of a JSON object written with indent=2
PNG = "png"
Style = Union[Comment, str, None]  # a Comment, PNG, or None (written unsigned)


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).hexdigest().encode()


def sign(data: bytes, style: Style) -> bytes:
    """`data` with its mark in `style` (unchanged when `style` is None or the data cannot take one)."""
    if style == PNG:
        return _sign_png(data)
    if not isinstance(style, Comment):
        return data
    line = style.prefix + MARK + _digest(data) + _NOTE + style.suffix + b"\n"
    if not (style.after and data[:16].lower().startswith(style.after)):
        return line + data
    end = data.find(b"\n") + 1
    if style is JSON and not data[end:].lstrip().startswith(b'"'):
        return data  # not an object with keys on lines of their own: a first key would not be JSON
    if end == 0:  # the line that stays first has no newline: the mark's line brings one
        return data + b"\n" + line
    return data[:end] + line + data[end:]


def signed(data: bytes) -> bool:
    """True when `data` carries fmcluster's mark and the rest is what was signed."""
    if data.startswith(PNG_SIGNATURE):
        found = _png_mark(data)
        return found is not None and found[0] == _digest(found[1])
    start = 0
    for _ in range(2):  # the mark is the first or the second line
        end = data.find(b"\n", start) + 1 or len(data)
        m = _MARK_LINE.search(data, start, end)
        if m:
            rest = data[:start] + data[end:]
            if end == len(data) and rest.endswith(b"\n"):  # after a first line that had no newline: it brought one
                return m.group(1) in (_digest(rest), _digest(rest[:-1]))
            return m.group(1) == _digest(rest)
        if end >= len(data):
            break
        start = end
    return False


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def _png_chunks(data: bytes) -> Optional[List[Tuple[int, int, bytes, bytes]]]:
    """(start, end, type, body) of each chunk; None when `data` is not a well-formed PNG."""
    chunks: List[Tuple[int, int, bytes, bytes]] = []
    at = len(PNG_SIGNATURE)
    while at + 12 <= len(data):
        (length,) = struct.unpack(">I", data[at:at + 4])
        end = at + 12 + length
        if end > len(data):
            return None
        chunks.append((at, end, data[at + 4:at + 8], data[at + 8:at + 8 + length]))
        at = end
    return chunks if at == len(data) and chunks and chunks[0][2] == b"IHDR" else None


def _sign_png(data: bytes) -> bytes:
    chunks = _png_chunks(data) if data.startswith(PNG_SIGNATURE) else None
    if not chunks:
        return data
    after_header = chunks[0][1]
    return data[:after_header] + _chunk(b"tEXt", _PNG_KEYWORD + b"sha256=" + _digest(data)) + data[after_header:]


def _png_mark(data: bytes) -> Optional[Tuple[bytes, bytes]]:
    for start, end, kind, body in _png_chunks(data) or []:
        if kind == b"tEXt" and body.startswith(_PNG_KEYWORD + b"sha256="):
            return body[len(_PNG_KEYWORD) + 7:], data[:start] + data[end:]
    return None
