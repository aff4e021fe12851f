"""How every ``statekit`` command's ``--help`` shows defaults: as a user would type them, and only where there is
one to show."""

from __future__ import annotations

import argparse


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` with each option's default, unless there is none to show (None, an off flag, an empty list) or
    its help says it already; a list default shows as its items, as they are typed (``all``, not ``['all']``)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False or action.default == [] \
                or "default" in (action.help or ""):
            return action.help
        if isinstance(action.default, list):
            shown = " ".join(map(str, action.default)).replace("%", "%%")  # help text is %-formatted
            return f"{action.help} (default: {shown})"
        return super()._get_help_string(action)
