"""Fixtures shared by several test modules: the live processes' (`processes`, `api`) from tests/live_processes.py."""

pytest_plugins = ["tests.live_processes"]
