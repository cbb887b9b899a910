"""The error types the CLI turns into one line: InputError (bad input, exit 2) and RuntimeFailure (exit 1)."""

from __future__ import annotations


class InputError(Exception):
    """Bad input: names the file, the object, the field and what was expected."""

    def __init__(self, message: str, *, file: str | None = None, obj: str | None = None,
                 field: str | None = None) -> None:
        self.message = message
        self.file = file
        self.obj = obj
        self.field = field
        super().__init__(self.render())

    def render(self) -> str:
        where = []
        if self.file:
            where.append(self.file)
        if self.obj:
            where.append(self.obj)
        if self.field:
            where.append(f"field {self.field}")
        prefix = ": ".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message

    def located(self, *, file: str | None = None, obj: str | None = None,
                field_prefix: str | None = None) -> InputError:
        """The same error with missing location parts filled in (inner parts win)."""
        field = self.field
        if field_prefix:
            field = f"{field_prefix}.{field}" if field else field_prefix
        return InputError(self.message, file=self.file or file, obj=self.obj or obj, field=field)


class RuntimeFailure(Exception):
    """The input was fine but the run could not be done (a server unreachable, a needed program missing):
    the CLI prints it on one line and exits with code 1."""


class RemoteError(RuntimeFailure):
    """A server the command talks to (an API server, Prometheus) could not be reached or failed while the
    command ran: the CLI prints the one-line message and exits with code 1."""
