"""How the session workflow reads activity failures and refuses bad requests."""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

OUTCOME_UNKNOWN = "EffectOutcomeUnknown"


class ModelCallFailed(Exception):
    """The model activity failed for good (retries spent or a non-retryable error)."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


class TurnCancelled(Exception):
    """Raised inside a turn when ``cancel_turn``, ``archive`` or a workflow cancellation asked it to stop."""


def rejected(message: str) -> ApplicationError:
    """An update validator's refusal: not retryable, typed ``RequestRejected`` (shown as such by any Temporal client)."""
    return ApplicationError(message, type="RequestRejected", non_retryable=True)


def error_type(err: BaseException) -> str | None:
    """The type of the innermost ``ApplicationError`` in the cause chain, if any."""
    found = None
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, ApplicationError):
            found = cause.type
        cause = cause.__cause__
    return found


def error_text(err: BaseException) -> str:
    """The first ``ApplicationError``'s type and message in the cause chain (e.g. the provider's
    status, URL and body); its own causes are lower-level details of the same failure."""
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, ApplicationError):
            return f"{cause.type}: {cause.message}" if cause.type else cause.message
        cause = cause.__cause__
    return str(err)
