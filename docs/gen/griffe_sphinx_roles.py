"""A Griffe extension for the API pages: docstrings written for the terminal, read as Markdown.

The package's docstrings are numpy style with Sphinx cross-reference roles
(``:func:`frame_metrics.evaluate```, ``:mod:`.corpus```, ``:class:`~x.Y```), which
mkdocstrings would print as they are; here each becomes inline code (``frame_metrics.evaluate``).
A wrapped line that starts with ``>`` (``>= 0.``, not a doctest's ``>>>``) would open a
Markdown block quote: it is escaped. ``threshold``'s default, ``NOT_GIVEN`` in the source
(a None the caller did not pass), is shown as the signature shows it: ``None``, of type
``float | None``.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

__all__ = ["SphinxRoles", "plain", "without_roles"]

_QUOTE = re.compile(r"^(\s*)>(?!>>)", re.M)
_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|obj|exc|const):`~?\.?([^`]+)`")


def without_roles(text: str) -> str:
    """``text`` with every Sphinx role replaced by inline code of its target."""
    return _ROLE.sub(lambda m: f"`{m.group(1)}`", text)


def plain(text: str) -> str:
    """A docstring as Markdown: no Sphinx roles, no line opening a block quote."""
    return _QUOTE.sub(r"\1\\>", without_roles(text))


class SphinxRoles(griffe.Extension):
    """Rewrite every docstring once the object tree is loaded."""

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring with :func:`plain`; show NOT_GIVEN as None."""
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
        if isinstance(obj, griffe.Function):
            for parameter in obj.parameters:
                if str(parameter.default) == "NOT_GIVEN":
                    parameter.default = "None"
                    parameter.annotation = str(parameter.annotation).replace(" | NotGiven", "")
