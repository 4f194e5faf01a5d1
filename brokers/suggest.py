"""Did-you-mean suggestions for a mistyped key or value, cheap for what is no word at all."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

#: what a mistyped key or choice looks like; only such words get a suggestion
_WORD = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def nearest(word: str, choices: Sequence[str], *, cutoff: float) -> str | None:
    """The choice nearest to a mistyped ``word``, if one is near enough. None at once for what is
    no typo of a word (spaces, quotes, control or non-ASCII characters, over 64 characters):
    difflib's comparison with every choice was most of the cost of refusing random keys."""
    if not _WORD.fullmatch(word):
        return None
    close = difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
    return close[0] if close else None
