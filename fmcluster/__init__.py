"""fmcluster: a GPU training cluster on AWS from one YAML spec.

Nothing heavy is imported here: nodes run ``python3 -m fmcluster.runtime.validate`` with
the standard library only. `build_app` and `load_spec` load aws_cdk/pydantic on first use.
"""

from typing import Any

__version__ = "0.1.0"
__all__ = ["build_app", "load_spec", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "build_app":
        from fmcluster.app import build_app

        return build_app
    if name == "load_spec":
        from fmcluster.registry import load_spec

        return load_spec
    raise AttributeError(f"module 'fmcluster' has no attribute {name!r}")
