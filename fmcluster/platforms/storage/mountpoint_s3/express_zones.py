"""Where S3 Express One Zone is offered: the AZ ids of each Region, as the Amazon S3 User Guide's table lists them.
Data, never fetched at run time; refresh from SOURCE and update READ. A Region or AZ id missing here is refused by
preflight with this list said, so a newly added zone needs this table updated (or `--skip s3-express-zone`)."""

from __future__ import annotations

from typing import Dict, Tuple

SOURCE = ("Amazon S3 User Guide, 'S3 Express One Zone Availability Zones and Regions' "
          "(https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-Endpoints.html)")
# The English page's table as far as the research tool's copy showed it, completed from the same page's translations
# (zh_cn, ja_jp), which list the same seven Regions; the Regional and Zonal endpoints page agrees where it was read.
READ = "2026-12-04"
ZONES: Dict[str, Tuple[str, ...]] = {
    "us-east-1": ("use1-az4", "use1-az5", "use1-az6"),
    "us-east-2": ("use2-az1", "use2-az2"),
    "us-west-2": ("usw2-az1", "usw2-az3", "usw2-az4"),
    "ap-south-1": ("aps1-az1", "aps1-az3"),
    "ap-northeast-1": ("apne1-az1", "apne1-az4"),
    "eu-west-1": ("euw1-az1", "euw1-az3"),
    "eu-north-1": ("eun1-az1", "eun1-az2", "eun1-az3"),
}
