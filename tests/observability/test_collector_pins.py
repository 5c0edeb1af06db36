"""scripts/check_collector_pins.py reads what install.sh pins and compares it with a release's sha256sums.txt."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("check_collector_pins", ROOT / "scripts" / "check_collector_pins.py")
assert spec is not None and spec.loader is not None
pins_script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pins_script)

# the format of a Prometheus release's sha256sums.txt (sha256sum output), two lines of node_exporter 1.8.2's
RELEASE_SUMS = """\
6809dd0b3ec45fd6e992c19071d6b5253aed3ead7bf0686885a51d85c6643c66  node_exporter-1.8.2.linux-amd64.tar.gz
627382b9723c642411c33f48861134ebe893e70a63bcc8b3fc0619cd0bfac4be  node_exporter-1.8.2.linux-arm64.tar.gz
"""


def test_every_archive_install_sh_downloads_has_a_pin_per_architecture():
    values = pins_script.pins(pins_script.INSTALL_SH.read_text())
    archives = {archive: sha for _, archive, sha in pins_script.archive_pins(values)}
    assert set(archives) == {
        f"node_exporter-{values['NODE_EXPORTER_VERSION']}.linux-amd64.tar.gz",
        f"node_exporter-{values['NODE_EXPORTER_VERSION']}.linux-arm64.tar.gz",
        f"prometheus-{values['PROMETHEUS_VERSION']}.linux-amd64.tar.gz",
        f"prometheus-{values['PROMETHEUS_VERSION']}.linux-arm64.tar.gz",
    }
    assert all(len(sha) == 64 for sha in archives.values())
    assert values["DCGM_EXPORTER_DIGEST"].startswith("sha256:")


def test_pinned_node_exporter_checksums_match_the_release_lines():
    values = pins_script.pins(pins_script.INSTALL_SH.read_text())
    published = pins_script.parse_sha256sums(RELEASE_SUMS)
    assert values["NODE_EXPORTER_VERSION"] == "1.8.2", "a new pin: put its release's lines in RELEASE_SUMS"
    node_exporter = [(a, sha) for project, a, sha in pins_script.archive_pins(values) if project == "node_exporter"]
    assert len(node_exporter) == 2
    for archive, pinned in node_exporter:
        assert published[archive] == pinned


def test_sha256sums_parsing_ignores_what_is_not_a_checksum_line():
    assert pins_script.parse_sha256sums("garbage\n" + "a" * 64 + " *x.tar.gz\n") == {"x.tar.gz": "a" * 64}
