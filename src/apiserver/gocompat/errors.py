"""The error the Go-compatible parsers raise: its text is Go's error text, word for word.

Operators search for Go's wording (``strconv.ParseBool: parsing "x": invalid syntax``, ``time:
invalid duration "1x"``), and kube-apiserver prints it inside its own messages, so callers
embed ``str(error)`` unchanged. ``apiserver.options.flagtypes.FlagValueError`` is this class:
a flag value that Go would refuse is reported with Go's words.
"""

from __future__ import annotations


class GoValueError(ValueError):
    """A value Go's parser refuses; ``str()`` is the text of Go's error."""


__all__ = ["GoValueError"]
