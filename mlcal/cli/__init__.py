"""The ``mlcal`` command line. Each sub-command lives in its own module of this package and
exposes ``register(subparsers)``, which adds its parser and sets ``handler``."""

from __future__ import annotations

import argparse
import importlib
import sys

# sub-command modules, in the order `mlcal --help` lists them
COMMAND_MODULES = ("quickstart", "fit", "evaluate", "demo", "calibrate", "export_onnx",
                   "promote", "warmup")


def build_parser() -> argparse.ArgumentParser:
    """The full ``mlcal`` argument parser."""
    from mlcal import __version__

    parser = argparse.ArgumentParser(
        prog="mlcal",
        description="Calibrate binary classifiers: fit calibration maps, evaluate them, "
                    "export and serve them.")
    parser.add_argument("--version", action="version", version=f"mlcal {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"mlcal.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code (0 success, 2 error unless a command says
    otherwise)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (ValueError, OSError, KeyError) as exc:
        print(f"mlcal {args.command}: error: {exc}", file=sys.stderr)
        return 2
