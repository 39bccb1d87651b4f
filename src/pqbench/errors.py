"""Errors with the exit codes of DESIGN.md; the CLI converts them at its edge."""

EXIT_OK = 0
EXIT_MEASUREMENT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_MISSING_CAPABILITY = 3


class PqbenchError(Exception):
    exit_code = EXIT_MEASUREMENT_FAILED


class BadInput(PqbenchError):
    """Invalid user input; the message names the field and what is allowed."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, field: str, message: str):
        self.field = field
        self.detail = message
        super().__init__(f"{field}: {message}")


class MissingCapability(PqbenchError):
    """Something this machine lacks; the message says what and how to fix it."""

    exit_code = EXIT_MISSING_CAPABILITY

    def __init__(self, what: str, fix: str):
        self.what = what
        self.fix = fix
        super().__init__(f"{what} (fix: {fix})")


class MeasurementFailed(PqbenchError):
    exit_code = EXIT_MEASUREMENT_FAILED
