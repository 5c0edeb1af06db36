"""Slurm accounting, as users expect `sacct`: HyperPod runs slurmdbd with MariaDB on the controller by default (AWS),
so `fmcluster plan` says where the history lives and what it would take to keep it elsewhere; ParallelCluster keeps it
only in a database it is given, which fmcluster does not create, so plan says it is off."""

from __future__ import annotations

from helpers import ROOT

from fmcluster.registry import load_spec


def notes(example: str):
    spec = load_spec(ROOT / "examples" / example)
    return " ".join(spec.orchestrator_kind.plan_notes(spec))


def test_hyperpod_slurm_plan_says_sacct_works_and_where_its_history_lives():
    text = notes("hyperpod-slurm-p5.yaml")
    assert "sacct" in text and "MariaDB on the controller" in text and "goes with a replaced one" in text
    assert "sagemaker-hyperpod-external-accounting-db-slurm.html" in text


def test_parallelcluster_plan_says_accounting_is_off_without_a_database():
    text = notes("parallelcluster-p5.yaml")
    assert "Slurm accounting (sacct) is off" in text and "SlurmSettings/Database" in text
