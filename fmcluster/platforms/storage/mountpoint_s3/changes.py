"""How ``fmcluster diff`` judges changes to Mountpoint's buckets: a general purpose bucket is stateful wherever it is
(the diff's own rule); an S3 Express One Zone directory bucket holds the mounted data too, so replacing it (a new Zone
or name) leaves the data in the old, retained bucket and mounts a new, empty one."""

from __future__ import annotations

from fmcluster.platforms.storage import ChangeRules

DIRECTORY_BUCKET = "AWS::S3Express::DirectoryBucket"


class MountpointChanges(ChangeRules):
    stateful = (DIRECTORY_BUCKET,)


RULES = MountpointChanges()
