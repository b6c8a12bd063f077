"""Fixtures of the simulator tests (defined in sim_helpers.py)."""

from sim_helpers import pools_file, small_config

__all__ = ["pools_file", "small_config"]
