"""The log of one source's failed samples: a line when it starts failing, then at most one line
per ``every`` seconds with the count since the last line, and a line when it recovers.

A source that fails on every sample (a broker down for an hour, a URL at a port that is not the
broker) thus writes a line a minute, not one per sample. Expected errors (the project's own,
:class:`~scaler.errors.ScalerError`) never carry a traceback; an unexpected exception (a bug)
carries one the first time only.
"""

from __future__ import annotations

import logging

from scaler.errors import ScalerError

#: at most one line per failing source this often
REPORT_EVERY = 60.0


class FailureLog:
    def __init__(self, log: logging.Logger, what: str, *, every: float = REPORT_EVERY) -> None:
        self._log = log
        self._what = what
        self.every = every
        self._failing = False
        self._reported_at = 0.0
        self._unreported = 0
        self._failures = 0
        self._traced: set[type[BaseException]] = set()

    def failed(self, error: BaseException, now: float) -> None:
        """One failed sample at ``now`` (monotonic seconds)."""
        self._failures += 1
        self._unreported += 1
        first = not self._failing
        if not first and now - self._reported_at < self.every:
            return
        self._failing = True
        trace = not isinstance(error, ScalerError) and type(error) not in self._traced
        if trace:
            self._traced.add(type(error))
        # the project's errors with their detail (the remote's reply, the errno text), which
        # only the log shows; an unexpected exception as it is
        shown = error.logged if isinstance(error, ScalerError) else error
        if first:
            self._log.warning(
                "sampling %s: %s", self._what, shown, exc_info=error if trace else None
            )
        else:
            self._log.warning(
                "sampling %s: %d failures in the last %.0fs, the last: %s",
                self._what, self._unreported, now - self._reported_at, shown,
                exc_info=error if trace else None,
            )  # fmt: skip
        self._reported_at = now
        self._unreported = 0

    def succeeded(self) -> None:
        """A good sample: a recovery is logged once."""
        if self._failing:
            self._log.info(
                "sampling %s works again, after %d failed samples", self._what, self._failures
            )
        self._failing = False
        self._failures = 0
        self._unreported = 0
