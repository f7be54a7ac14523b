"""What a tool result carries out of the worker: the worker's provider keys redacted, in the store
and in the preview that crosses Temporal."""

from __future__ import annotations

import uuid

import pytest

from agentrt.activities import ToolActivities, configured_keys
from agentrt.activities.tools import default_registry
from agentrt.schemas import ModelProfile, ToolCall, ToolExecuteInput
from agentrt.store import Store


class Profiles:
    def __init__(self, **profiles: ModelProfile) -> None:
        self.profiles = profiles


def test_configured_keys_are_the_values_of_the_profiles_key_variables_that_are_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_KEY_A", "sk-aaaaaaaaaaaaaaaa")
    monkeypatch.delenv("TEST_KEY_B", raising=False)
    config = Profiles(
        a=ModelProfile(name="a", provider="openai", model="m", api_key_env="TEST_KEY_A"),
        b=ModelProfile(name="b", provider="openai", model="m", api_key_env="TEST_KEY_B"),
        c=ModelProfile(name="c", provider="scripted", model="scripted"),
    )

    assert configured_keys(config) == ["sk-aaaaaaaaaaaaaaaa"]


def test_a_key_a_tool_printed_is_redacted_in_the_store_and_in_the_preview(store: Store) -> None:
    key = "sk-live-0123456789abcdef"
    tools = ToolActivities(default_registry(), store, secrets=lambda: [key])
    session_id = f"redact-{uuid.uuid4().hex[:8]}"
    call = ToolCall(id="c1", name="shell.run", arguments={"command": "env"})
    input = ToolExecuteInput(
        session_id=session_id, turn_id="turn-1", call=call, workspace="/tmp", idempotency_key="k", result_position=1
    )

    result = tools._finish(input, True, f"OPENAI_KEY={key}\nurl: https://u:pw@example.com/x", None)

    assert result.preview == "OPENAI_KEY=[redacted] url: https://[redacted]@example.com/x"
    ((_, stored),) = store.messages(session_id)
    assert key not in stored.text and "pw@" not in stored.text


def test_a_file_name_that_is_not_utf8_reaches_the_store_as_a_replacement_character(store: Store) -> None:
    # A lone surrogate in a tool's output made the store refuse the message and the effect's record.
    from agentrt.store import text_column

    assert text_column("wrote 2 bytes to notes\udc80.txt\x00") == "wrote 2 bytes to notes\ufffd.txt\ufffd"
    store.claim_effect("sur/1", "s-sur", "fs.write")
    assert store.record_effect("sur/1", "applied", "notes\udc80.txt").result_text == "notes\ufffd.txt"
