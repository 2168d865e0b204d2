"""One error type for bad input, so the CLI can print one line and exit 2."""


class KvvizError(ValueError):
    """Bad input: the message names the field and what is wrong with it."""


def require(condition: bool, message: str) -> None:
    """Raise KvvizError(message) unless condition holds (input validation, never `assert`)."""
    if not condition:
        raise KvvizError(message)
