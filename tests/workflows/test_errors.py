"""How the session workflow reads activity failures (workflows/_errors.py): error_text and error_type."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ActivityError, ApplicationError, RetryState

from agentrt.workflows._errors import error_code, error_text, error_type, rejected


def _chain(*errors: BaseException) -> BaseException:
    """``errors[0]`` caused by ``errors[1]`` caused by ... (as ``raise a from b`` sets it)."""
    for outer, inner in zip(errors, errors[1:]):
        outer.__cause__ = inner
    return errors[0]


def _activity_error() -> ActivityError:
    """What ``workflow.execute_activity`` raises: the activity's failure is its cause."""
    return ActivityError(
        "Activity task failed",
        scheduled_event_id=5,
        started_event_id=6,
        identity="worker",
        activity_type="provider.complete",
        activity_id="1",
        retry_state=RetryState.MAXIMUM_ATTEMPTS_REACHED,
    )


def test_error_text_is_the_first_application_errors_type_and_message() -> None:
    err = _chain(_activity_error(), ApplicationError("HTTP 503 from api.example", type="ProviderHTTPError"))
    assert error_text(err) == "ProviderHTTPError: HTTP 503 from api.example"


def test_error_text_skips_the_lower_level_causes_of_the_first_application_error() -> None:
    err = _chain(
        _activity_error(),
        ApplicationError("HTTP 429 from api.example", type="ProviderHTTPError"),
        ApplicationError("connection reset", type="ReadError"),
    )
    assert error_text(err) == "ProviderHTTPError: HTTP 429 from api.example"


def test_error_text_of_an_untyped_application_error_is_its_message() -> None:
    assert error_text(_chain(_activity_error(), ApplicationError("boom"))) == "boom"


def test_error_text_without_any_application_error_is_the_error_itself() -> None:
    assert error_text(_chain(RuntimeError("outer"), ValueError("inner"))) == "outer"


def test_error_text_follows_a_chain_made_by_raise_from() -> None:
    def fail() -> None:
        try:
            raise ApplicationError("quota exceeded", type="BudgetExceeded")
        except ApplicationError as cause:
            raise RuntimeError("the model call failed") from cause

    with pytest.raises(RuntimeError) as caught:
        fail()
    assert error_text(caught.value) == "BudgetExceeded: quota exceeded"
    assert error_type(caught.value) == "BudgetExceeded"


def test_error_type_is_the_innermost_application_errors_type() -> None:
    err = _chain(
        _activity_error(),
        ApplicationError("wrapped", type="ProviderError"),
        ApplicationError("effect outcome unknown", type="EffectOutcomeUnknown"),
    )
    assert error_type(err) == "EffectOutcomeUnknown"


def test_error_type_looks_past_errors_that_are_not_application_errors() -> None:
    err = _chain(RuntimeError("outer"), ApplicationError("x", type="UnknownProfileError"), ValueError("detail"))
    assert error_type(err) == "UnknownProfileError"


def test_error_type_without_any_application_error_is_none() -> None:
    assert error_type(_chain(_activity_error(), RuntimeError("lost worker"))) is None


def test_error_type_of_an_application_error_alone_is_its_own_type() -> None:
    assert error_type(ApplicationError("bad profile", type="ConfigurationError")) == "ConfigurationError"


def test_a_rejection_is_a_non_retryable_request_rejected_error() -> None:
    err = rejected("principal 'mallory' is not the owner")
    assert (err.type, err.non_retryable, err.message) == ("RequestRejected", True, "principal 'mallory' is not the owner")
    assert error_text(err) == "RequestRejected: principal 'mallory' is not the owner"


@pytest.mark.parametrize(
    ("type_name", "code"),
    [
        ("EmptyResponseError", "empty_response"),
        ("ScriptExhaustedError", "script_exhausted"),
        ("ProviderHTTPError", "provider_http"),
        ("ProviderProtocolError", "provider_protocol"),
        ("UnknownProfileError", "unknown_profile"),
        ("MissingSummary", "missing_summary"),
    ],
)
def test_error_code_is_the_first_typed_causes_name_in_snake_case(type_name: str, code: str) -> None:
    err = _chain(_activity_error(), ApplicationError("boom", type=type_name), ApplicationError("inner", type="Other"))

    assert error_code(err) == code


def test_error_code_is_none_without_a_typed_cause() -> None:
    assert error_code(_chain(_activity_error(), ApplicationError("boom"))) is None
    assert error_code(RuntimeError("plain")) is None
