"""How the session workflow reads activity failures and refuses bad requests."""

from __future__ import annotations

from typing import Any

from temporalio.exceptions import ApplicationError

from agentrt.schemas import BudgetCrossing, ContextBreakdown

OUTCOME_UNKNOWN = "EffectOutcomeUnknown"
# The types of a model call's refusal before it was sent (activities/_call_gate.py): the turn ends
# ``budget_exceeded`` with the failure's type as its ``error_type``.
REFUSAL_TYPES = ("BudgetExceeded", "QuotaExceeded")


class ModelCallFailed(Exception):
    """The model activity failed for good (retries spent or a non-retryable error); ``error_type``
    is the failure's code (``error_code``)."""

    def __init__(self, error: str, error_type: str | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.error_type = error_type


class CallRefused(Exception):
    """The model activity refused the call before sending it: ``error_type`` (``BudgetExceeded``
    or ``QuotaExceeded``), the limit it met as a ``crossing``, and the refusal's ``text``."""

    def __init__(self, error_type: str, crossing: BudgetCrossing, text: str) -> None:
        super().__init__(text)
        self.error_type = error_type
        self.crossing = crossing
        self.text = text


def call_refusal(err: BaseException) -> CallRefused | None:
    """The refusal in ``err``'s cause chain (a non-retryable ``ApplicationError`` of a
    ``REFUSAL_TYPES`` type with its details), or None for any other failure."""
    for cause in _application_errors(err):
        if cause.type in REFUSAL_TYPES and cause.non_retryable and cause.details:
            details: Any = cause.details[0]
            if not isinstance(details, dict):
                return None
            if cause.type == "QuotaExceeded":
                details = {
                    "dimension": details.get("quota", "quota"), "limit": details.get("limit", 0),
                    "used": details.get("used", 0), "estimated": details.get("estimated"),
                }
            try:
                crossing = BudgetCrossing.model_validate(details)
            except ValueError:
                return None
            return CallRefused(cause.type, crossing, cause.message)
    return None


def context_overflow(err: BaseException) -> ContextBreakdown | None:
    """The breakdown a ``ContextOverflow`` in ``err``'s cause chain carries (the call was not
    sent: its pinned parts alone pass the window), or None for any other failure."""
    for cause in _application_errors(err):
        if cause.type == "ContextOverflow" and cause.details and isinstance(cause.details[0], dict):
            try:
                return ContextBreakdown.model_validate(cause.details[0])
            except ValueError:
                return None
    return None


class TurnCancelled(Exception):
    """Raised inside a turn when ``cancel_turn``, ``archive`` or a workflow cancellation asked it to stop."""


def rejected(message: str) -> ApplicationError:
    """An update validator's refusal: not retryable, typed ``RequestRejected`` (shown as such by any Temporal client)."""
    return ApplicationError(message, type="RequestRejected", non_retryable=True)


def _application_errors(err: BaseException) -> list[ApplicationError]:
    """The ``ApplicationError``s in ``err``'s cause chain, outermost first."""
    found = []
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, ApplicationError):
            found.append(cause)
        cause = cause.__cause__
    return found


def error_type(err: BaseException) -> str | None:
    """The type of the innermost ``ApplicationError`` in the cause chain, if any."""
    errors = _application_errors(err)
    return errors[-1].type if errors else None


def error_text(err: BaseException) -> str:
    """The first ``ApplicationError``'s type and message in the cause chain (e.g. the provider's
    status, URL and body); its own causes are lower-level details of the same failure."""
    errors = _application_errors(err)
    if not errors:
        return str(err)
    first = errors[0]
    return f"{first.type}: {first.message}" if first.type else first.message


def error_code(err: BaseException) -> str | None:
    """The first ``ApplicationError`` type in the cause chain as a snake_case code, without an
    ``Error`` suffix: ``EmptyResponseError`` → ``empty_response``, ``ScriptExhaustedError`` →
    ``script_exhausted``, ``ProviderHTTPError`` → ``provider_http``. None when no cause has a type."""
    for cause in _application_errors(err):
        if cause.type:
            return _snake_case(cause.type.removesuffix("Error") or cause.type)
    return None


def _snake_case(name: str) -> str:
    """``ProviderHTTP`` → ``provider_http``: a word starts at an upper-case letter that follows a
    lower-case letter or digit, or that precedes a lower-case letter after an upper-case one."""
    out: list[str] = []
    for i, char in enumerate(name):
        if char.isupper() and i > 0:
            before, after = name[i - 1], name[i + 1] if i + 1 < len(name) else ""
            if before.islower() or before.isdigit() or (before.isupper() and after.islower()):
                out.append("_")
        out.append(char.lower())
    return "".join(out)
