"""`fmcluster status` for FSx for Lustre: the file system (lifecycle, capacity, mount name) and each data repository
association."""

from __future__ import annotations

from typing import Dict

from fmcluster.aws.context import Context
from fmcluster.aws.status import Describer, Item, health


def _fsx(ctx: Context, pid: str) -> Item:
    fs = ctx.client("fsx").describe_file_systems(FileSystemIds=[pid])["FileSystems"][0]
    life = fs.get("Lifecycle", "?")
    lustre = fs.get("LustreConfiguration", {})
    mount = f", mount {fs.get('DNSName')}@tcp:/{lustre.get('MountName')}" if lustre.get("MountName") else ""
    detail = f"{lustre.get('DeploymentType', fs.get('FileSystemType', ''))} {fs.get('StorageCapacity', '?')} GiB{mount}"
    if fs.get("FailureDetails", {}).get("Message"):
        detail += f"; {fs['FailureDetails']['Message']}"
    return Item("FSx file system", pid, life, health(life, {"AVAILABLE"}, {"CREATING", "UPDATING"}), detail)


def _dra(ctx: Context, pid: str) -> Item:
    a = ctx.client("fsx").describe_data_repository_associations(AssociationIds=[pid])["Associations"][0]
    life = a.get("Lifecycle", "?")
    detail = f"{a.get('FileSystemPath')} <-> {a.get('DataRepositoryPath')}"
    if a.get("FailureDetails", {}).get("Message"):
        detail += f"; {a['FailureDetails']['Message']}"
    return Item("FSx DRA", pid, life, health(life, {"AVAILABLE"}, {"CREATING", "UPDATING"}), detail)


DESCRIBERS: Dict[str, Describer] = {
    "AWS::FSx::FileSystem": ("fsx", _fsx),
    "AWS::FSx::DataRepositoryAssociation": ("fsx", _dra),
}
