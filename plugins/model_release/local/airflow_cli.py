"""Airflow CLI commands run as the ``airflow`` command runs them, several in one process.

A stack prepares Airflow's metadata database with ``airflow db migrate`` and then ``airflow pools
set`` (the canary's pool). As two processes, each paid Airflow's start-up: 2.3-3.4 CPU-s on 2 cores.
:func:`airflow_commands` runs a list of commands one after the other in one interpreter, each as the
``airflow`` command's ``main`` runs it (the configuration module first, the default configuration
written if needed, the parsed arguments' ``func`` called), and lets the interpreter end without its
last sweep of Airflow's objects (as :mod:`.quick_exit` explains).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

#: the canary's pool (name, slots, description): one release at a time on the canary Triton
CANARY_POOL = ("triton_canary", "1", "one release at a time on the canary Triton")
#: what a stack runs before Airflow's first use: the schema, then the pool
PREPARE_DB = [["db", "migrate"], ["pools", "set", *CANARY_POOL]]

_SCRIPT = """
import atexit, gc, json, sys
atexit.register(gc.freeze)  # registered first: runs after Airflow's own exit handlers
from airflow import configuration  # first, as the airflow command imports it
from airflow.cli import cli_parser
from airflow.configuration import write_default_airflow_configuration_if_needed

write_default_airflow_configuration_if_needed()
parser = cli_parser.get_parser()
for argv in json.loads(sys.argv[1]):
    args = parser.parse_args(argv)
    args.func(args)
"""


def airflow_commands(commands: list[list[str]], *, env: dict[str, str], cwd: Path, timeout: float = 600) -> None:
    """Run ``commands`` (each the arguments of one ``airflow`` command) in order, in one process.

    Raises:
        ServiceUnavailable: a command failed (the process stops at it); the message names the
            commands and ends with the last of what the process printed.
    """
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(commands)], env=env, cwd=cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if proc.returncode != 0:
        from ..errors import ServiceUnavailable

        said = "; ".join(f"airflow {' '.join(c[:3])}" for c in commands)
        raise ServiceUnavailable(f"preparing Airflow's database ({said}) failed (exit {proc.returncode}); "
                                 f"the commands' last output: {proc.stdout[-3000:]}")
