"""Runs the `nagare` CLI against a test broker's HTTP admin API."""

import json
import subprocess

from conftest import BIN


def cli(nagare, *args, check=True, timeout=30):
    """`nagare ARGS --http ADDR`; returns the finished process (stdout as text)."""
    p = subprocess.run([BIN, *args, "--http", nagare.http], capture_output=True, text=True,
                       timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"nagare {' '.join(args)} failed ({p.returncode}):\n{p.stderr}")
    return p


def cli_json(nagare, *args):
    return json.loads(cli(nagare, *args, "--output", "json").stdout)
