#!/usr/bin/env python3
"""Simulate a town: the same as ``simulacra run`` (see ``python run_sim.py --help``)."""

import sys

from simulacra.cli import run_sim_main

if __name__ == "__main__":
    sys.exit(run_sim_main())
