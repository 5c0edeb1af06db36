"""Check the collector pins in fmcluster/runtime/observability/install.sh against their primary sources.

Needs the internet, so it is a maintainer's step (run it when a pin changes), not part of `make test`:

    .venv/bin/python scripts/check_collector_pins.py

- node_exporter and Prometheus: each GitHub release publishes ``sha256sums.txt``
  (https://github.com/prometheus/<project>/releases/download/v<version>/sha256sums.txt); every pinned archive
  checksum must equal the line for ``<project>-<version>.linux-<arch>.tar.gz``.
- dcgm-exporter: the registry's ``Docker-Content-Digest`` of the pinned tag (nvcr.io, anonymous pull token) must
  equal the pinned digest.

Exit 0 when every pin matches, 1 on a mismatch, 2 when a source cannot be read.
"""

from __future__ import annotations

import json
import re
import sys
import urllib.request
from pathlib import Path
from typing import Dict, List, Tuple

INSTALL_SH = Path(__file__).resolve().parent.parent / "fmcluster" / "runtime" / "observability" / "install.sh"
PROJECTS = {"node_exporter": "NODE_EXPORTER", "prometheus": "PROMETHEUS"}
TIMEOUT = 30


def pins(text: str) -> Dict[str, str]:
    """The shell assignments NAME="value" of install.sh."""
    return dict(re.findall(r'^([A-Z][A-Z0-9_a-z]*)="([^"]*)"', text, flags=re.MULTILINE))


def archive_pins(values: Dict[str, str]) -> List[Tuple[str, str, str]]:
    """(project, archive file name, pinned sha256) for every project and architecture install.sh pins."""
    found = []
    for project, var in PROJECTS.items():
        version = values[f"{var}_VERSION"]
        for arch in ("amd64", "arm64"):
            found.append((project, f"{project}-{version}.linux-{arch}.tar.gz", values[f"{var}_SHA256_{arch}"]))
    return found


def parse_sha256sums(text: str) -> Dict[str, str]:
    """`sha256sum` output (``<hex>  <file>``) as file name -> checksum."""
    sums = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and re.fullmatch(r"[0-9a-f]{64}", parts[0]):
            sums[parts[1].lstrip("*")] = parts[0]
    return sums


def _get(url: str, headers: Dict[str, str], method: str = "GET") -> Tuple[str, Dict[str, str]]:
    if not url.startswith("https://"):
        raise ValueError(f"not an https URL: {url}")
    request = urllib.request.Request(url, headers=headers, method=method)  # noqa: S310 (https only, checked above)
    with urllib.request.urlopen(request, timeout=TIMEOUT) as response:  # noqa: S310
        return response.read().decode(), dict(response.headers)


def registry_digest(image: str) -> str:
    """The registry's digest of `image` (``nvcr.io/<repo>:<tag>``), by an anonymous pull token."""
    host, rest = image.split("/", 1)
    repo, tag = rest.rsplit(":", 1)
    token = json.loads(_get(f"https://{host}/proxy_auth?scope=repository:{repo}:pull", {})[0])["token"]
    accept = ", ".join(["application/vnd.oci.image.index.v1+json",
                        "application/vnd.docker.distribution.manifest.list.v2+json",
                        "application/vnd.docker.distribution.manifest.v2+json"])
    _, headers = _get(f"https://{host}/v2/{repo}/manifests/{tag}",
                      {"Authorization": f"Bearer {token}", "Accept": accept}, method="HEAD")
    return {k.lower(): v for k, v in headers.items()}["docker-content-digest"]


def main() -> int:
    values = pins(INSTALL_SH.read_text())
    bad = 0
    try:
        for project, archive, pinned in archive_pins(values):
            version = archive.split("-", 1)[1].split(".linux-")[0]
            url = f"https://github.com/prometheus/{project}/releases/download/v{version}/sha256sums.txt"
            published = parse_sha256sums(_get(url, {})[0]).get(archive)
            ok = published == pinned
            bad += not ok
            print(f"{'ok ' if ok else 'BAD'} {archive}: pinned {pinned}, published {published}")
        image, pinned = values["DCGM_EXPORTER_IMAGE"], values["DCGM_EXPORTER_DIGEST"]
        digest = registry_digest(image)
        bad += digest != pinned
        print(f"{'ok ' if digest == pinned else 'BAD'} {image}: pinned {pinned}, registry {digest}")
    except (OSError, ValueError, KeyError) as err:
        print(f"cannot read a source: {err}", file=sys.stderr)
        return 2
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
