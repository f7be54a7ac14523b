"""The errors of external payload storage, apart from the drivers so that every driver module
(``_payloads.py``, ``_s3_payloads.py``) raises the same classes."""

from __future__ import annotations

from agentrt.schemas import RunError

__all__ = ["PayloadNotFound", "PayloadStorageError", "PayloadStorageUnavailable"]


class PayloadStorageError(RunError):
    """An externally stored payload could not be stored or read back: a malformed claim, bytes that
    do not match their key, storage that does not answer. Fields: ``driver`` (driver name), ``key``
    (SHA-256 hex, or the S3 object key), ``location`` (database URL without password, directory,
    or ``s3://bucket``), ``reason``."""

    def __init__(self, driver: str, key: str, location: str, reason: str) -> None:
        self.driver = driver
        self.key = key
        self.location = location
        self.reason = reason
        super().__init__(f"payload {key!r} in {driver} ({location}): {reason}")


class PayloadNotFound(PayloadStorageError):
    """A reference in workflow history names a payload this driver does not hold.

    Usually the process reading it is configured with another database or directory than
    the one that wrote it.
    """

    def __init__(self, driver: str, key: str, location: str) -> None:
        super().__init__(
            driver, key, location,
            "not found; every client and worker must use the same payload storage "
            "([payloads] and [store] url in agentrt.toml, AGENTRT_PAYLOAD_* and AGENTRT_DATABASE_URL)",
        )


class PayloadStorageUnavailable(PayloadStorageError):
    """The payload storage refused or did not answer a store or read: an S3 bucket that does not
    exist, credentials it refuses or none found, an endpoint that cannot be reached. ``reason``
    says which and what to check; the cause (the S3 client's error) is chained."""
