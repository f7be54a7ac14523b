"""Activity options (workflows/_activity_options.py): bounded retries, per-call bounds, heartbeats, cancellation."""

from __future__ import annotations

import inspect
from datetime import timedelta

import pytest
from temporalio.workflow import ActivityCancellationType

from agentrt.schemas import (
    ADVISOR_REVIEW,
    CONTEXT_COMPACT,
    EFFECTS_RECONCILE,
    GRAPH_PLAN,
    GRAPH_RECORD,
    GRAPH_REVIEW,
    MCP_CALL_TOOL,
    MCP_LIST_TOOLS,
    MEMORY_DECIDE,
    PROFILES_DESCRIBE,
    PROVIDER_COMPLETE,
    SESSION_PREPARE,
    STORE_APPEND,
    TASK_CHECK_COMMAND,
    TASK_EVALUATE_TRIGGER,
    TASK_NEXT_WAKE,
    TASK_RECORD,
    TASK_REVIEW,
    TASK_WORKSPACE_COMMIT,
    TOOL_EXECUTE,
    TOOLS_LIST,
)
from agentrt.workflows import _activity_options as options
from agentrt.workflows._activity_options import ActivityConfig

CONFIGS: dict[str, ActivityConfig] = {
    name: value for name, value in vars(options).items() if isinstance(value, ActivityConfig)
}
# Store writes retry without a bound on purpose (the module says why, beside STORE_RETRY).
UNBOUNDED = {"STORE_WRITE", "RECONCILE_EFFECT", "TASK_RECORD", "GRAPH_RECORD"}


def _options(config: ActivityConfig) -> dict:
    return config.options(summary="s", start_to_close=10, heartbeat_timeout=5)


def test_every_activity_has_one_config() -> None:
    names = sorted(config.name for config in CONFIGS.values())
    assert names == sorted(
        [
            ADVISOR_REVIEW, CONTEXT_COMPACT, EFFECTS_RECONCILE, MEMORY_DECIDE, PROFILES_DESCRIBE, PROVIDER_COMPLETE,
            SESSION_PREPARE, STORE_APPEND, TOOL_EXECUTE, TOOLS_LIST, MCP_LIST_TOOLS, MCP_CALL_TOOL,
            TASK_RECORD, TASK_CHECK_COMMAND, TASK_EVALUATE_TRIGGER, TASK_REVIEW, TASK_NEXT_WAKE, TASK_WORKSPACE_COMMIT,
            GRAPH_PLAN, GRAPH_REVIEW,
            GRAPH_RECORD,
        ]
    )


@pytest.mark.parametrize("name", sorted(set(CONFIGS) - UNBOUNDED))
def test_every_retry_policy_has_a_bound(name: str) -> None:
    assert CONFIGS[name].retry_policy.maximum_attempts > 0


@pytest.mark.parametrize("name", sorted(UNBOUNDED))
def test_only_store_writes_retry_without_a_bound(name: str) -> None:
    assert CONFIGS[name].retry_policy.maximum_attempts == 0
    assert CONFIGS[name].retry_policy is options.STORE_RETRY


def test_the_unbounded_store_retry_states_its_reason_beside_it() -> None:
    above = inspect.getsource(options).split("\nSTORE_RETRY = ")[0].splitlines()
    comment = []
    while above and above[-1].startswith("#"):
        comment.insert(0, above.pop())
    assert "without a bound on purpose" in " ".join(comment)


def test_listing_tools_does_not_retry_forever() -> None:
    assert 0 < options.LIST_TOOLS.retry_policy.maximum_attempts <= 20
    assert 0 < options.PREPARE_SESSION.retry_policy.maximum_attempts <= 20


def test_configuration_mistakes_are_not_retried_by_model_calls() -> None:
    assert {"ConfigurationError", "UnknownProfileError"} <= set(
        options.MODEL_CALL.retry_policy.non_retryable_error_types or []
    )


def test_options_without_a_needed_start_to_close_bound_raise() -> None:
    with pytest.raises(ValueError, match="provider.complete needs a start_to_close bound"):
        options.MODEL_CALL.options(summary="model", heartbeat_timeout=5)


def test_options_of_a_heartbeating_activity_without_a_heartbeat_timeout_raise() -> None:
    with pytest.raises(ValueError, match="tool.execute heartbeats and needs a heartbeat timeout"):
        options.TOOL_CALL.options(summary="tool", start_to_close=60)


def test_a_fixed_bound_is_used_when_the_call_gives_none() -> None:
    result = options.RECONCILE_EFFECT.options(summary="reconcile")
    assert result == {
        "start_to_close_timeout": timedelta(seconds=30),
        "retry_policy": options.STORE_RETRY,
        "summary": "reconcile",
    }


def test_a_store_write_heartbeats_so_a_dead_workers_write_is_retried_after_the_heartbeat_timeout() -> None:
    result = options.STORE_WRITE.options(summary="store 1 message", heartbeat_timeout=3)
    assert result["start_to_close_timeout"] == timedelta(seconds=30)
    assert result["heartbeat_timeout"] == timedelta(seconds=3)
    assert options.PREPARE_SESSION.options(summary="prepare", heartbeat_timeout=3)["heartbeat_timeout"] == timedelta(seconds=3)


def test_a_per_call_bound_overrides_the_fixed_one() -> None:
    assert options.LIST_TOOLS.options(summary="s", start_to_close=5)["start_to_close_timeout"] == timedelta(seconds=5)


def test_a_heartbeating_activity_gets_its_heartbeat_timeout() -> None:
    result = options.COMPACTION.options(summary="s", start_to_close=120, heartbeat_timeout=7.5)
    assert result["heartbeat_timeout"] == timedelta(seconds=7.5)
    assert "cancellation_type" not in result


def test_a_cancellable_activity_waits_for_the_cancel_to_complete() -> None:
    result = options.TOOL_CALL.options(summary="s", start_to_close=60, heartbeat_timeout=5)
    assert result["cancellation_type"] == ActivityCancellationType.WAIT_CANCELLATION_COMPLETED


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_options_carry_heartbeat_timeout_and_cancellation_type_exactly_as_configured(name: str) -> None:
    config = CONFIGS[name]
    result = _options(config)
    assert ("heartbeat_timeout" in result) == config.heartbeats
    assert ("cancellation_type" in result) == config.cancellable
    assert result["retry_policy"] is config.retry_policy


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_cancellable_activity_also_heartbeats_so_the_cancel_reaches_it(name: str) -> None:
    config = CONFIGS[name]
    assert config.heartbeats or not config.cancellable


def test_a_heartbeat_timeout_given_to_an_activity_that_does_not_heartbeat_is_not_passed_on() -> None:
    assert "heartbeat_timeout" not in options.LIST_TOOLS.options(summary="s", heartbeat_timeout=5)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_local_options_keep_the_bound_and_retries_and_never_a_heartbeat(name: str) -> None:
    config = CONFIGS[name]
    result = config.local_options(summary="s", start_to_close=9)
    assert result["start_to_close_timeout"] == timedelta(seconds=9)
    assert result["retry_policy"] is config.retry_policy
    assert "heartbeat_timeout" not in result  # local activities cannot heartbeat
    assert ("cancellation_type" in result) == config.cancellable


def test_a_local_tool_call_waits_for_its_cancel_so_no_result_lands_after_the_turn_ended() -> None:
    result = options.TOOL_CALL.local_options(summary="fs.read", start_to_close=options.LOCAL_TOOL_SECONDS)
    assert result["cancellation_type"] == ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
    assert result["start_to_close_timeout"] == timedelta(seconds=options.LOCAL_TOOL_SECONDS)


def test_local_options_without_a_needed_bound_raise() -> None:
    with pytest.raises(ValueError, match="tool.execute needs a start_to_close bound"):
        options.TOOL_CALL.local_options(summary="tool")


def test_an_advisor_review_is_bounded_as_a_whole_retries_included() -> None:
    advisor = options.ADVISOR.options(summary="s", start_to_close=7, heartbeat_timeout=3)

    assert advisor["schedule_to_close_timeout"] == advisor["start_to_close_timeout"] == timedelta(seconds=7)
    assert "schedule_to_close_timeout" not in _options(options.MODEL_CALL)


def test_an_invalid_cron_expression_is_not_retried() -> None:
    assert "InvalidCron" in (options.TASK_NEXT_WAKE.retry_policy.non_retryable_error_types or [])


def test_a_task_command_is_retried_a_few_times_only_and_its_bound_is_given_per_call() -> None:
    for config in (options.TASK_CHECK_COMMAND, options.TASK_EVALUATE_TRIGGER):
        assert 1 < config.retry_policy.maximum_attempts <= 3
        with pytest.raises(ValueError, match="needs a start_to_close bound"):
            config.options(summary="s", heartbeat_timeout=5)
