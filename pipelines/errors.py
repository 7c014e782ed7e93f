"""The error every layer may raise for what the user asked of it: a source, setting or flag that
cannot be used, said in words a user can act on. The CLI prints its message alone and exits with
status 2 (a usage error). It lives below everything, so the lowest layers (object storage, the
extras) raise it without importing the configuration that reads the user's settings.
"""


class ConfigError(ValueError):
    """A source or setting that cannot be used, said in words a user can act on (exit status 2)."""


class DamagedRecord(ValueError):
    """A build record that cannot be read (cut short, emptied, of another format). Its message names
    the file and the way on; the CLI prints it alone and exits with status 1."""
