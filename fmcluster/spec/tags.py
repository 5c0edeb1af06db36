"""The spec's `tags`: the rules AWS applies to tags, checked before synth so a deploy never fails on them.

AWS tagging rules (e.g. the CloudFormation resource Tag type, https://docs.aws.amazon.com/AWSCloudFormation/latest/
UserGuide/aws-properties-resource-tags.html, and the Tagging AWS Resources guide,
https://docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html): at most 50 user tags per resource, keys of
1-128 and values of 0-256 Unicode characters, letters, digits, spaces and ``+ - = . _ : / @`` only, and the prefix
``aws:`` (any case) reserved for AWS on keys and values. That character set also keeps out NUL and CloudFormation's
``${...}`` substitution syntax, which would otherwise reach templates and ParallelCluster's config.
"""

from __future__ import annotations

import re
from typing import Dict, List

from fmcluster.spec.base import Problem

MAX_TAGS_PER_RESOURCE = 50
MAX_KEY_LENGTH = 128
MAX_VALUE_LENGTH = 256
# fmcluster tags every resource with fmcluster:cluster and each node with fmcluster:node-group; orchestrators add
# theirs (ParallelCluster its parallelcluster:* tags). Ten slots stay free for them.
RESERVED_TAG_SLOTS = 10
MAX_USER_TAGS = MAX_TAGS_PER_RESOURCE - RESERVED_TAG_SLOTS
OWN_PREFIX = "fmcluster:"
ALLOWED_CHARACTERS = re.compile(r"^[\w +\-=.:/@]*$")  # \w: Unicode letters and digits, and _
ALLOWED_TEXT = "letters, digits, spaces and + - = . _ : / @"


def tag_problems(tags: Dict[str, str]) -> List[Problem]:
    """What AWS would refuse in `tags` (or what would clash with fmcluster's own), one problem per tag."""
    found: List[Problem] = []
    if len(tags) > MAX_USER_TAGS:
        found.append(("tags", f"{len(tags)} tags; at most {MAX_USER_TAGS} (AWS allows {MAX_TAGS_PER_RESOURCE} per "
                      f"resource and fmcluster and the orchestrator keep {RESERVED_TAG_SLOTS} for their own)"))
    for key, value in tags.items():
        at = f"tags.{key}"
        if not 1 <= len(key) <= MAX_KEY_LENGTH:
            found.append((at, f"the key has {len(key)} characters; AWS allows 1 to {MAX_KEY_LENGTH}"))
        elif not ALLOWED_CHARACTERS.match(key):
            found.append((at, f"the key holds characters AWS refuses in tags; allowed: {ALLOWED_TEXT}"))
        elif key.lower().startswith("aws:"):
            found.append((at, "the prefix aws: is reserved for AWS's own tags; choose another key"))
        elif key.startswith(OWN_PREFIX):
            found.append((at, f"the prefix {OWN_PREFIX} is fmcluster's own (it tags every resource with it); choose "
                          "another key"))
        if len(value) > MAX_VALUE_LENGTH:
            found.append((at, f"the value has {len(value)} characters; AWS allows at most {MAX_VALUE_LENGTH}"))
        elif not ALLOWED_CHARACTERS.match(value):
            found.append((at, f"the value holds characters AWS refuses in tags (or ${{...}}, which CloudFormation "
                          f"would substitute); allowed: {ALLOWED_TEXT}"))
        elif value.lower().startswith("aws:"):
            found.append((at, "a value starting with aws: is reserved for AWS; choose another value"))
    return found
