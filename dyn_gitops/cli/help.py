"""``--help`` in sections (input, output, render settings, limits, ...) instead of one flat
list of some sixty options, and links that work where the wheel is installed: a
repository path such as ``docs/argocd.md`` is shown as its URL."""

from __future__ import annotations

import inspect
import re
from typing import Any

import click

#: where the documentation lives (the wheel holds no docs/)
PROJECT_URL = "https://github.com/dyn-gitops/dyn-gitops"
DOCS_URL = f"{PROJECT_URL}/blob/main/"
_REPO_PATH = re.compile(r"(?<![\w/.:-])((?:docs|charts|samples|deploy)/[\w./-]*[\w/])")

#: the sections, in the order --help shows them (a setting's registry group by its name)
SECTIONS = {
    "input": "Input",
    "output": "Output",
    "render": "Render settings",
    "limits": "Limits (only flags and the environment may raise them)",
    "command": "Options",
}


def linked(text: str) -> str:
    """``text`` followed by the URL of each repository path it names (``docs/argocd.md``),
    each on a line of its own that --help does not rewrap (a URL cut at a hyphen would not
    work)."""
    paths = list(dict.fromkeys(_REPO_PATH.findall(text)))
    if not paths or DOCS_URL in text:
        return text
    return text + "\n\n\b\n" + "\n".join(DOCS_URL + p for p in paths)


class Option(click.Option):
    """An option in a section of ``--help`` (``section``: a key of :data:`SECTIONS`)."""

    def __init__(self, *args: Any, section: str = "command", **kwargs: Any) -> None:
        if kwargs.get("help"):
            kwargs["help"] = linked(kwargs["help"])
        super().__init__(*args, **kwargs)
        self.section = section


class Command(click.Command):
    """A command whose ``--help`` lists its options by section."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("help"):
            kwargs["help"] = linked(inspect.cleandoc(kwargs["help"]))
        super().__init__(*args, **kwargs)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        sections: dict[str, list[tuple[str, str]]] = {k: [] for k in SECTIONS}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                sections[getattr(param, "section", "command")].append(record)
        for key, title in SECTIONS.items():
            if sections[key]:
                with formatter.section(title):
                    formatter.write_dl(sections[key])


class Group(click.Group):
    """A group whose commands are :class:`Command` s, with links in its help."""

    command_class = Command

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("help"):
            kwargs["help"] = linked(inspect.cleandoc(kwargs["help"]))
        super().__init__(*args, **kwargs)


__all__ = ["DOCS_URL", "PROJECT_URL", "SECTIONS", "Command", "Group", "Option", "linked"]
