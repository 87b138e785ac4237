"""The ``mlcal`` command line. Each sub-command lives in its own module of this package and
exposes ``register(subparsers)``, which adds its parser and sets ``handler``."""

from __future__ import annotations

import argparse
import importlib
import sys

from mlcal._optional import MissingExtraError

# sub-command modules, in the order `mlcal --help` lists them
COMMAND_MODULES = ("quickstart", "fit", "evaluate", "demo", "calibrate", "export_onnx",
                   "promote", "gate_server", "monitor", "report", "serve", "verify", "warmup")


def build_parser() -> argparse.ArgumentParser:
    """The full ``mlcal`` argument parser."""
    from mlcal import __version__

    parser = argparse.ArgumentParser(
        prog="mlcal",
        description="Calibrate binary and multiclass classifiers: fit calibration maps, "
                    "evaluate them, export and serve them.")
    parser.add_argument("--version", action="version", version=f"mlcal {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            importlib.import_module(f"mlcal.cli.{name}").register(sub)
        except MissingExtraError as exc:
            _register_unavailable(sub, name.replace("_", "-"), exc)
    return parser


def _register_unavailable(sub, command: str, exc: MissingExtraError) -> None:
    """A command whose optional integration is not installed: listed, and running it says
    which extra to install (instead of `mlcal --help` itself failing)."""
    # no option prefix (NUL never appears in argv): every argument, --options included, is
    # swallowed so the user sees the missing extra, not an argument error
    p = sub.add_parser(command, help=f"(needs an optional extra: {exc})", add_help=False,
                       prefix_chars="\0")
    p.add_argument("args", nargs="*")

    def unavailable(args):
        raise exc

    p.set_defaults(handler=unavailable)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code (0 success, 2 error unless a command says
    otherwise)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (ValueError, OSError, KeyError, MissingExtraError) as exc:
        print(f"mlcal {args.command}: error: {exc}", file=sys.stderr)
        return 2
