"""Kinds' and platforms' AWS tests ask for fake credentials (``aws_env``) and moto (``moto``) by name."""

from helpers.aws_fixtures import aws_env, moto  # noqa: F401 - fixtures
