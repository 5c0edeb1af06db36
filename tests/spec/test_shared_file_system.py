"""The shared file system is a store's answer, read through the spec's storage: consumers (serving, checkpoints, the
planner, the CLI's jobs) ask `storage.file_system()` and never name the store."""

from __future__ import annotations

from helpers import ROOT

from fmcluster.registry import load_spec, spec_model


def test_the_spec_names_its_shared_file_system_through_the_store_that_declares_itself_one():
    spec = load_spec(ROOT / "examples" / "eks-p5.yaml")
    found = spec.storage.file_system()
    assert found is not None
    key, section = found
    assert key == type(spec.storage).file_system_key()
    assert section.claim and section.title and section.mount_point.startswith("/")


def test_a_spec_without_one_says_which_section_adds_it():
    storage = spec_model().model_fields["storage"].default_factory()
    assert storage.file_system() is None
    assert type(storage).file_system_key() in type(storage).section_models()


def test_at_most_one_store_section_is_the_shared_file_system():
    storage = spec_model().model_fields["storage"].default_factory
    models = storage().section_models().values()
    assert sum(1 for m in models if m.shared_file_system) == 1
