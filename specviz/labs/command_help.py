"""What every `python -m specviz` command's --help says of its options: what each does and its default.

The commands' parsers live beside what they run (specviz.cli, specviz.labs.bench, .check, .draft_report,
specviz.training.recipe); this is the one rule they share, here where every one of them may import it.
"""

from __future__ import annotations

import argparse


def with_defaults(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Every option of `parser` says its default in its help (where it has one and the help does not
    already say it): one rule for every command's --help. Returns the parser."""
    for action in parser._actions:
        if action.help in (None, argparse.SUPPRESS) or isinstance(action, argparse._HelpAction):
            continue
        if action.default is None or action.default is False or action.default == argparse.SUPPRESS:
            continue  # nothing to say: an option that is off unless given
        if "default" not in action.help:
            action.help += " (default: %(default)s)"
    return parser
