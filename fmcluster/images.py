"""Image families: what fmcluster must know about the AMI a node group boots, per family. The family decides the
root device the launch template resizes (a wrong name adds a second, unformatted disk and leaves the root small),
the public SSM parameter of the default image, and where the AMI mounts the instance NVMe. docs/images.md has the
sources; `fmcluster preflight` checks the root device and the parameter against the account."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from fmcluster.runtime.contract import INSTANCE_NVME_ROOT

DLAMI_PARAMETER = "/aws/service/deeplearning/ami/{arch}/base-oss-nvidia-driver-gpu-{os}/latest/ami-id"


@dataclass(frozen=True)
class ImageFamily:
    name: str
    description: str
    root_device: str
    ssm_parameters: Dict[str, str]  # architecture -> public SSM parameter naming the latest image
    instance_store: Optional[str]  # where the image mounts the instance NVMe (None: it does not)
    unverified: Tuple[str, ...] = ()

    def default_parameter(self, architecture: str) -> Optional[str]:
        return self.ssm_parameters.get(architecture)


def _dlami(os: str) -> Dict[str, str]:
    return {arch: DLAMI_PARAMETER.format(arch=arch, os=os) for arch in ("x86_64", "arm64")}


FAMILIES: Dict[str, ImageFamily] = {
    f.name: f
    for f in (
        ImageFamily("dlami-ubuntu-22.04", "Deep Learning Base OSS NVIDIA Driver GPU AMI (Ubuntu 22.04)", "/dev/sda1",
                    _dlami("ubuntu-22.04"), INSTANCE_NVME_ROOT, ("root_device",)),
        ImageFamily("dlami-ubuntu-24.04", "Deep Learning Base OSS NVIDIA Driver GPU AMI (Ubuntu 24.04)", "/dev/sda1",
                    _dlami("ubuntu-24.04"), INSTANCE_NVME_ROOT, ("root_device",)),
        ImageFamily("dlami-al2023", "Deep Learning Base OSS NVIDIA Driver GPU AMI (Amazon Linux 2023)", "/dev/xvda",
                    _dlami("amazon-linux-2023"), INSTANCE_NVME_ROOT, ()),
    )
}
DEFAULT_FAMILY = "dlami-ubuntu-22.04"


def family(name: str) -> ImageFamily:
    return FAMILIES[name]
