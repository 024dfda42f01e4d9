"""The exception hierarchy: one root, :class:`AprofError`, and a family per failure source."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from ._enums import CREATE_CONFIG_NULL_HINT, acl_error_info


class AprofError(RuntimeError):
    """Root of every error asc-aprof raises.

    A ``RuntimeError``, as every failure of the upstream ``asc.lib.profiling`` is, so code written
    for it (``except RuntimeError``) catches asc-aprof's errors unchanged.
    """


class UsageError(AprofError):
    """The API was called in a way that cannot work (wrong state, nesting, bad argument)."""


class CollectionTimeout(AprofError):
    """An aclprof call did not return within the caller's timeout (the collector still finishes it)."""


class InvalidArgumentError(UsageError, ValueError):
    """An argument has a value that cannot work; the message names it (also a ``ValueError``)."""


class NoSamplesError(AprofError, ValueError):
    """:func:`~asc_aprof.task_time_median` found no sample of the kernel (also a ``ValueError``)."""


class AclError(AprofError):
    """An ``aclprof*`` function returned a non-zero ``aclError`` (or CreateConfig returned NULL).

    :ivar code: the numeric ``aclError``
    :ivar symbol: its symbolic name, e.g. ``ACL_ERROR_PROF_ALREADY_RUN``
    :ivar function: the C function that failed, e.g. ``aclprofStart``
    :ivar hint: one line on what usually causes it
    """

    def __init__(
        self, function: str, code: int, *, hint: str | None = None, returned: str | None = None
    ) -> None:
        info = acl_error_info(code)
        self.function = function
        self.code = code
        self.symbol = info.symbol
        self.hint = hint if hint is not None else info.hint
        self._returned = returned
        what = f"returned {code}" if returned is None else f"returned {returned} (reported as {code})"
        super().__init__(f"{function} {what} ({self.symbol}): {self.hint}")

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_acl_error, (self.function, self.code, self.hint, self._returned))


def _rebuild_acl_error(function: str, code: int, hint: str, returned: str | None = None) -> AclError:
    return AclError(function, code, hint=hint, returned=returned)


def create_config_null_error(devices: Sequence[int] | None = None) -> AclError:
    """The error for a NULL from ``aclprofCreateConfig`` (reported as 100000), naming the devices."""
    returned = "NULL"
    if devices is not None:
        ids = ", ".join(str(d) for d in devices)
        returned = f"NULL for device{'s' if len(devices) != 1 else ''} {ids}"
    return AclError("aclprofCreateConfig", 100000, hint=CREATE_CONFIG_NULL_HINT, returned=returned)


class ToolkitNotFoundError(AprofError):
    """No CANN toolkit (libmsprofiler.so and msprof.py) was found.

    :ivar searched: every place that was looked at
    """

    def __init__(self, message: str, searched: Sequence[str] = ()) -> None:
        self.searched = tuple(searched)
        super().__init__(message)


class ExportError(AprofError, subprocess.CalledProcessError):
    """``msprof.py export`` failed, hung, or produced no CSV.

    Also a :class:`subprocess.CalledProcessError`, which upstream's ``export()`` raises, so
    ``except CalledProcessError`` catches it: ``cmd`` is the argv as a list, ``stderr`` the output
    tail (text, where upstream's holds the captured bytes), ``output`` None.

    The message shows msprof.py's last ``[ERROR]`` and ``[WARNING]`` lines first (the real
    msprof.py prints them to stdout, tracebacks to stderr), then the other last lines of its output.

    :ivar returncode: the exit status (negative for a signal; None when it never ran or hung)
    :ivar command: the argv that was run
    :ivar diagnostics: its last ``[ERROR]`` and ``[WARNING]`` lines, however many lines followed
    :ivar output_tail: the last lines it wrote, to stdout and stderr (one stream, in order)
    :ivar stderr_tail: the former name of ``output_tail`` (it is no longer stderr only)
    """

    def __init__(
        self,
        message: str,
        *,
        command: Sequence[str],
        returncode: int | None = None,
        output_tail: str = "",
        diagnostics: str = "",
        stderr_tail: str = "",
    ) -> None:
        self.command = tuple(command)
        self.returncode = returncode  # type: ignore[assignment]  # None: it never ran, or hung
        self.output_tail = output_tail or stderr_tail
        self.diagnostics = diagnostics
        self._set_called_process_fields()
        # RuntimeError's: CalledProcessError's __init__ takes (returncode, cmd), set just above
        RuntimeError.__init__(self, _export_error_text(message, self.command, self.output_tail, diagnostics))

    def _set_called_process_fields(self) -> None:
        self.cmd = list(self.command)
        self.output = None
        self.stderr = self.output_tail

    def __str__(self) -> str:
        # CalledProcessError's own text ("Command ... returned non-zero exit status") would hide
        # the diagnostics; this message has the command, the status and the output's tail.
        return str(self.args[0]) if self.args else ""

    @property
    def stderr_tail(self) -> str:
        """The former name of :attr:`output_tail`, kept for code written against it."""
        return self.output_tail

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild_export_error,
            (self.args[0], self.command, self.returncode, self.output_tail, self.diagnostics),
        )


def _export_error_text(message: str, command: tuple[str, ...], tail: str, diagnostics: str) -> str:
    """The message, the command, the diagnostics, then the tail less the lines shown above."""
    text = f"{message}\n  command: {' '.join(command)}"
    if diagnostics:
        text += "\n  msprof.py errors and warnings (last):\n    " + diagnostics.replace("\n", "\n    ")
    shown = set(diagnostics.split("\n")) if diagnostics else set()
    rest = [line for line in tail.split("\n") if line not in shown] if tail else []
    if rest:
        label = "other output" if diagnostics else "output"
        text += f"\n  {label} (last lines, stdout and stderr):\n    " + "\n    ".join(rest)
    return text


def _rebuild_export_error(
    text: str,
    command: tuple[str, ...],
    returncode: int | None,
    output_tail: str,
    diagnostics: str = "",
) -> ExportError:
    err = ExportError.__new__(ExportError)
    Exception.__init__(err, text)
    err.command, err.returncode = command, returncode  # type: ignore[assignment]
    err.output_tail, err.diagnostics = output_tail, diagnostics
    err._set_called_process_fields()
    return err


class ParseError(AprofError, ValueError):
    """A CSV could not be parsed.

    :ivar source: the file (or stream name) being parsed
    :ivar line: the 1-based line number of the offending row (0 when not line-specific)
    """

    def __init__(self, message: str, *, source: str, line: int = 0) -> None:
        self.source = source
        self.line = line
        where = f"{source}:{line}" if line else source
        super().__init__(f"{where}: {message}")

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_parse_error, (self.args[0], self.source, self.line))


def _rebuild_parse_error(text: str, source: str, line: int) -> ParseError:
    err = ParseError.__new__(ParseError)
    ValueError.__init__(err, text)
    err.source, err.line = source, line
    return err
