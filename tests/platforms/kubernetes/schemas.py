"""Offline schema validation of Kubernetes objects: built-in kinds against the OpenAPI schema of a Kubernetes version
(kubernetes-validate bundles 1.25-1.37, strict: unknown fields are errors, as kubectl's fieldValidation=Strict), custom
resources against the openAPIV3Schema of their CRD, vendored under crds/ (see crds/README.md)."""

from __future__ import annotations

import copy
import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any, Dict, Tuple

import jsonschema
import kubernetes_validate

CRDS = Path(__file__).resolve().parent / "crds"


@cache
def crd_schemas() -> Dict[Tuple[str, str], Dict[str, Any]]:
    """(apiVersion, kind) -> strict JSON schema of the vendored CRDs."""
    found = {}
    for path in [*CRDS.glob("*.json"), *CRDS.glob("*.json.gz")]:  # the largest schemas are kept gzipped
        data = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_text())
        found[(f"{data['group']}/{data['version']}", data["kind"])] = _strict(data["openAPIV3Schema"])
    return found


def _strict(schema: Dict[str, Any]) -> Dict[str, Any]:
    """Unknown fields are errors (as the API server's strict field validation), metadata is left to the API server,
    and the Kubernetes extensions that JSON Schema lacks are dropped (int-or-string accepts both)."""
    schema = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if not isinstance(node, dict):
            return
        if node.pop("x-kubernetes-int-or-string", False):
            node.pop("type", None)
            node.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
        if node.get("type") == "object" and "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            node.setdefault("additionalProperties", False)
        for value in node.values():
            if isinstance(value, dict):
                walk(value)
            elif isinstance(value, list):
                for item in value:
                    walk(item)

    walk(schema)
    schema.setdefault("properties", {})["metadata"] = {"type": "object"}
    return schema


def validate(obj: Dict[str, Any], kubernetes_version: str) -> None:
    """Raise on an object its API server would refuse for its schema (CEL rules and defaulting are not checked)."""
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    if key in crd_schemas():
        jsonschema.Draft7Validator(crd_schemas()[key]).validate(obj)
        return
    kubernetes_validate.validate(obj, kubernetes_version, strict=True)
