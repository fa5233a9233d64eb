"""The exception family of the device package.

The CLI turns every `DeviceError` into one line on stderr and exit status 2.
"""


class DeviceError(Exception):
    """Base of everything the device side refuses on purpose."""


class BadInput(DeviceError):
    """Malformed input from a user, a file or a model: nothing was written."""


class DataDirError(DeviceError):
    """The data directory is missing, not initialised, or damaged."""


class NotFound(DeviceError):
    """A named thing (event, contact, note) does not exist."""
