"""How a provider's failure crosses Temporal: an ``ApplicationError`` typed and sized for the
server, with the profile's API key kept out of it and of the worker's log."""

from __future__ import annotations

import os

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentrt.activities.providers import application_error_from, redact
from agentrt.schemas import ModelProfile, ProviderError

__all__ = ["cause_types", "provider_failure", "secrets_of"]


def provider_failure(err: ProviderError, profile: ModelProfile, max_retry_delay: float | None = None) -> ApplicationError:
    """The ``ApplicationError`` for ``err``, to be raised ``from None``, with the profile's API key
    and any URL credentials redacted (``providers.redact``). The server keeps a retrying
    activity's last failure only up to 4 KB (``limit.mutableStateActivityFailureSize.error``) and
    shows "Failure exceeds size limit." for a bigger one: with every cause's stack trace a
    refused connection is bigger, and the user would not see why the call failed. The worker's
    log gets the redacted message and the chain of causes by type."""
    secrets = secrets_of(profile)
    activity.logger.warning("model call failed: %s%s", redact(str(err), secrets), cause_types(err))
    return application_error_from(err, max_retry_delay=max_retry_delay, secrets=secrets)


def secrets_of(profile: ModelProfile) -> list[str | None]:
    """The API key ``profile`` reads from the worker's environment (to keep it out of errors)."""
    return [os.environ.get(profile.api_key_env)] if profile.api_key_env else []


def cause_types(err: BaseException) -> str:
    """`` (caused by httpx.ConnectError <- httpcore.ConnectError ...)``, or nothing."""
    names = []
    cause = err.__cause__ or err.__context__
    while cause is not None and len(names) < 8:
        names.append(f"{type(cause).__module__}.{type(cause).__qualname__}")
        cause = cause.__cause__ or cause.__context__
    return f" (caused by {' <- '.join(names)})" if names else ""
