"""Errors the library raises for bad input: one line a page or CLI can show as it is."""


class LifecycleError(ValueError):
    """Bad input to a stage. ``param`` names the offending parameter when there is one."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
