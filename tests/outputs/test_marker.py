"""fmcluster's mark on what it writes: each format keeps meaning what it did, a marked file is known again, and one
edited since, or never marked, is not."""

from __future__ import annotations

import json
import struct
import zlib
from xml.dom import minidom

import pytest

from fmcluster.outputs import marker

SAMPLES = [
    (marker.HASH, b"#!/bin/bash\necho hi\n"),
    (marker.HASH, b"groups:\n- name: plan\n"),
    (marker.XML, b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"/>\n'),
    (marker.XML, b"<!doctype html><html><body>plan</body></html>\n"),
    (marker.DOT, b"digraph {\n  a -> b\n}\n"),
    (marker.JSON, json.dumps({"version": "55.0.0", "pluginReports": []}, indent=2).encode()),
]


@pytest.mark.parametrize("style, data", SAMPLES)
def test_a_marked_file_is_known_again_and_an_edited_one_is_not(style: marker.Style, data: bytes) -> None:
    signed = marker.sign(data, style)
    assert marker.signed(signed) and not marker.signed(data)
    assert not marker.signed(signed.replace(data[-3:], data[-3:-1] + b"X"))  # a character of the rest changed
    lines = signed.split(b"\n")
    assert b"fmcluster-output sha256=" in lines[0] + lines[1]


def test_each_format_still_parses_with_its_mark() -> None:
    script = marker.sign(SAMPLES[0][1], marker.HASH)
    assert script.startswith(b"#!/bin/bash\n# fmcluster-output")  # the #! line stays first
    svg = marker.sign(SAMPLES[2][1], marker.XML)
    assert minidom.parseString(svg).documentElement.tagName == "svg"
    report = json.loads(marker.sign(SAMPLES[5][1], marker.JSON))
    assert report["pluginReports"] == [] and report["fmcluster"].startswith("fmcluster-output sha256=")
    assert marker.sign(b"{}", marker.JSON) == b"{}"  # no key to go first: written unmarked


def png() -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    return marker.PNG_SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\x00")) + \
        chunk(b"IEND", b"")


def test_a_png_carries_its_mark_in_a_text_chunk_after_the_header() -> None:
    signed = marker.sign(png(), marker.PNG)
    assert marker.signed(signed) and not marker.signed(png())
    at, kinds = 8, []
    while at < len(signed):  # every chunk's CRC holds, so decoders take it
        (length,) = struct.unpack(">I", signed[at:at + 4])
        kind, body = signed[at + 4:at + 8], signed[at + 8:at + 8 + length]
        assert struct.unpack(">I", signed[at + 8 + length:at + 12 + length])[0] == zlib.crc32(kind + body)
        kinds.append(kind)
        at += 12 + length
    assert kinds == [b"IHDR", b"tEXt", b"IDAT", b"IEND"]
    assert not marker.signed(signed[:-20] + b"x" + signed[-19:])


def test_a_pdf_is_written_unmarked() -> None:
    assert marker.sign(b"%PDF-1.5\n...", None) == b"%PDF-1.5\n..."
