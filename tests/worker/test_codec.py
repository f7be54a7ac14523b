"""The AES-GCM payload codec: encryption, key rotation, refusals, the ``[codec]`` keys and how
the data converter encrypts before it offloads big payloads."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.exceptions import ApplicationError

from agentrt.schemas import ConfigurationError
from agentrt.worker import (
    AesGcmCodec,
    AgentrtConfig,
    AgentrtPlugin,
    CodecConfig,
    DevServer,
    PayloadConfig,
    PayloadDecryptionError,
    build_data_converter,
    generate_codec_key,
    payload_storage,
)
from agentrt.worker._codec import KeylessCodec, codec_config, key_fingerprint

K1 = bytes(range(32))
K2 = bytes(range(100, 132))
SECRET = "the launch code is 0000"


def plain_payload(text: str = SECRET) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(text).encode())


def b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def env_keys(**keys: bytes) -> str:
    return ",".join(f"{key_id}:{b64(key)}" for key_id, key in keys.items())


def keys_file(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


# ---------------------------------------------------------------- the codec


async def test_a_payload_round_trips_through_encryption() -> None:
    codec = AesGcmCodec({"k1": K1}, "k1")
    original = plain_payload()

    (encrypted,) = await codec.encode([original])

    assert await codec.decode([encrypted]) == [original]


async def test_an_encrypted_payload_names_its_key_and_holds_only_nonce_and_ciphertext() -> None:
    codec = AesGcmCodec({"k1": K1}, "k1")
    original = plain_payload()

    (encrypted,) = await codec.encode([original])

    assert dict(encrypted.metadata) == {"encoding": b"binary/encrypted", "encryption-key-id": b"k1"}
    assert len(encrypted.data) == 12 + original.ByteSize() + 16  # nonce, ciphertext, tag
    assert SECRET.encode() not in encrypted.data


async def test_two_encryptions_of_one_payload_use_different_nonces() -> None:
    codec = AesGcmCodec({"k1": K1}, "k1")

    first, second = await codec.encode([plain_payload(), plain_payload()])

    assert first.data[:12] != second.data[:12] and first.data != second.data


async def test_payloads_written_with_an_old_key_still_decrypt_after_rotation_and_new_ones_use_the_current_key() -> None:
    (old,) = await AesGcmCodec({"k1": K1}, "k1").encode([plain_payload("old")])
    rotated = AesGcmCodec({"k1": K1, "k2": K2}, "k2")

    (new,) = await rotated.encode([plain_payload("new")])

    assert await rotated.decode([old, new]) == [plain_payload("old"), plain_payload("new")]
    assert new.metadata["encryption-key-id"] == b"k2"


async def test_a_payload_under_a_key_id_this_process_lacks_is_refused_naming_the_key() -> None:
    (encrypted,) = await AesGcmCodec({"k2": K2}, "k2").encode([plain_payload()])
    reader = AesGcmCodec({"k1": K1}, "k1")

    with pytest.raises(PayloadDecryptionError, match="'k2'.*no such key here.*holds k1") as caught:
        await reader.decode([encrypted])
    assert caught.value.key_id == "k2"


async def test_a_tampered_ciphertext_is_refused_naming_the_key() -> None:
    codec = AesGcmCodec({"k1": K1}, "k1")
    (encrypted,) = await codec.encode([plain_payload()])
    data = bytearray(encrypted.data)
    data[20] ^= 0x01
    encrypted.data = bytes(data)

    with pytest.raises(PayloadDecryptionError, match="'k1'.*authentication failed") as caught:
        await codec.decode([encrypted])
    assert caught.value.key_id == "k1"


async def test_a_payload_relabelled_with_another_key_id_is_refused() -> None:
    codec = AesGcmCodec({"k1": K1, "k2": K2}, "k1")
    (encrypted,) = await codec.encode([plain_payload()])
    encrypted.metadata["encryption-key-id"] = b"k2"

    with pytest.raises(PayloadDecryptionError, match="'k2'.*authentication failed"):
        await codec.decode([encrypted])


async def test_a_payload_shorter_than_a_nonce_and_a_tag_is_refused() -> None:
    codec = AesGcmCodec({"k1": K1}, "k1")
    short = Payload(metadata={"encoding": b"binary/encrypted", "encryption-key-id": b"k1"}, data=b"x" * 27)

    with pytest.raises(PayloadDecryptionError, match="27 bytes is shorter"):
        await codec.decode([short])


async def test_payloads_that_are_not_encrypted_pass_through_decode_unchanged() -> None:
    codec = AesGcmCodec({"k1": K1}, "k1")
    written_before = [plain_payload(), Payload(metadata={"encoding": b"binary/null"})]

    assert await codec.decode(written_before) == written_before


async def test_the_codec_reads_payloads_in_the_format_of_the_sdk_encryption_sample() -> None:
    # samples-python encryption/codec.py (and the Go and TypeScript samples): nonce || AES-GCM(serialized payload), no associated data.
    nonce = os.urandom(12)
    foreign = Payload(
        metadata={"encoding": b"binary/encrypted", "encryption-key-id": b"k1"},
        data=nonce + AESGCM(K1).encrypt(nonce, plain_payload().SerializeToString(), None),
    )

    assert await AesGcmCodec({"k1": K1}, "k1").decode([foreign]) == [plain_payload()]


async def test_a_process_without_keys_refuses_an_encrypted_payload_naming_its_key() -> None:
    (encrypted,) = await AesGcmCodec({"k1": K1}, "k1").encode([plain_payload()])

    with pytest.raises(PayloadDecryptionError, match="'k1'.*no codec keys"):
        await KeylessCodec().decode([plain_payload(), encrypted])


async def test_a_process_without_keys_passes_plain_payloads_both_ways() -> None:
    payloads = [plain_payload()]

    assert await KeylessCodec().encode(payloads) == payloads
    assert await KeylessCodec().decode(payloads) == payloads


@pytest.mark.parametrize(
    ("keys", "current", "message"),
    [
        ({"k1": b"short"}, "k1", "'k1' is 5 bytes; AES-256-GCM keys are 32 bytes"),
        ({"k1": K1}, "k9", "current key 'k9' is not among the keys"),
        ({"bad id": K1}, "bad id", "key id 'bad id' must be"),
        ({"a,b": K1}, "a,b", "key id 'a,b' must be"),
        ({}, "k1", "no keys"),
    ],
)
def test_a_codec_with_bad_keys_is_refused(keys: dict[str, bytes], current: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        AesGcmCodec(keys, current)


def test_a_generated_key_is_32_random_bytes() -> None:
    first, second = generate_codec_key(), generate_codec_key()

    assert len(first) == 32 and first != second


def test_the_same_key_id_with_other_bytes_has_another_fingerprint() -> None:
    assert key_fingerprint("k1", K1) != key_fingerprint("k1", K2)
    assert key_fingerprint("k1", K1).startswith("aes-gcm:k1@")
    assert b64(K1) not in key_fingerprint("k1", K1) and K1.hex()[:12] not in key_fingerprint("k1", K1)


# ---------------------------------------------------------------- [codec] configuration


def test_keys_from_the_environment_are_loaded_with_the_named_current_key() -> None:
    config = codec_config({}, None, {"AGENTRT_CODEC_KEYS": env_keys(k1=K1, k2=K2), "AGENTRT_CODEC_CURRENT_KEY": "k2"})

    assert config.keys == {"k1": K1, "k2": K2}
    assert config.current_key == "k2"
    assert config.codec().current == "k2"  # type: ignore[union-attr]


def test_a_single_key_is_current_without_being_named() -> None:
    config = codec_config({}, None, {"AGENTRT_CODEC_KEYS": env_keys(only=K1)})

    assert config.current_key == "only"


def test_url_safe_base64_keys_are_accepted() -> None:
    key = b"\xfb\xff" * 16  # '+' and '/' in standard base64
    config = codec_config({}, None, {"AGENTRT_CODEC_KEYS": f"k1:{base64.urlsafe_b64encode(key).decode()}"})

    assert config.keys == {"k1": key}


def test_several_keys_without_a_current_one_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="2 keys \\(k1, k2\\) and none is current"):
        codec_config({}, None, {"AGENTRT_CODEC_KEYS": env_keys(k1=K1, k2=K2)})


def test_a_current_key_that_is_not_among_the_keys_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="current key 'k3' is not among the keys \\(k1, k2\\)"):
        codec_config({}, None, {"AGENTRT_CODEC_KEYS": env_keys(k1=K1, k2=K2), "AGENTRT_CODEC_CURRENT_KEY": "k3"})


def test_a_current_key_without_any_keys_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="current key 'k1' is set but no keys are"):
        codec_config({"current_key": "k1"}, Path("/etc/agentrt.toml"), {})


def test_a_key_that_is_not_32_bytes_is_refused_without_showing_it() -> None:
    short = b64(b"sixteen byte key")

    with pytest.raises(ConfigurationError, match="'k1' is 16 bytes after base64 decoding") as caught:
        codec_config({}, None, {"AGENTRT_CODEC_KEYS": f"k1:{short}"})
    assert short not in str(caught.value)


def test_a_key_that_is_not_base64_is_refused_without_showing_it() -> None:
    with pytest.raises(ConfigurationError, match="'k1' is not valid base64") as caught:
        codec_config({}, None, {"AGENTRT_CODEC_KEYS": "k1:not base64 at all!"})
    assert "not base64 at all" not in str(caught.value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("k1", "entry 1 is not 'id:base64key'"),
        (f"k1:{b64(K1)},k1:{b64(K2)}", "key id 'k1' is given twice"),
        (f"-k:{b64(K1)}", "key id '-k' must be"),
        (" , ", "no keys"),
    ],
)
def test_a_malformed_environment_key_list_is_refused(value: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        codec_config({}, None, {"AGENTRT_CODEC_KEYS": value})


def test_a_toml_keys_file_beside_agentrt_toml_is_read_with_its_current_key(tmp_path: Path) -> None:
    keys_file(tmp_path / "codec-keys.toml", f'current = "k2"\n[keys]\nk1 = "{b64(K1)}"\nk2 = "{b64(K2)}"\n')
    (tmp_path / "agentrt.toml").write_text('[codec]\nkeys_file = "codec-keys.toml"\n')

    config = AgentrtConfig.load(tmp_path / "agentrt.toml", env={})

    assert config.codec.keys_file == str(tmp_path / "codec-keys.toml")
    assert config.codec.keys == {"k1": K1, "k2": K2} and config.codec.current_key == "k2"


def test_the_configured_current_key_wins_over_the_keys_file(tmp_path: Path) -> None:
    keys_file(tmp_path / "keys.toml", f'current = "k2"\n[keys]\nk1 = "{b64(K1)}"\nk2 = "{b64(K2)}"\n')
    (tmp_path / "agentrt.toml").write_text('[codec]\nkeys_file = "keys.toml"\ncurrent_key = "k1"\n')

    assert AgentrtConfig.load(tmp_path / "agentrt.toml", env={}).codec.current_key == "k1"
    assert AgentrtConfig.load(tmp_path / "agentrt.toml", env={"AGENTRT_CODEC_CURRENT_KEY": "k2"}).codec.current_key == "k2"


def test_a_json_keys_file_is_read(tmp_path: Path) -> None:
    path = keys_file(tmp_path / "keys.json", json.dumps({"keys": {"k1": b64(K1)}}))

    config = codec_config({"keys_file": str(path)}, None, {})

    assert config.keys == {"k1": K1} and config.current_key == "k1"


def test_a_keys_file_readable_by_every_user_is_refused(tmp_path: Path) -> None:
    path = keys_file(tmp_path / "keys.toml", f'[keys]\nk1 = "{b64(K1)}"\n', mode=0o644)

    with pytest.raises(ConfigurationError, match="readable or writable by every user \\(mode -rw-r--r--\\).*chmod 600"):
        codec_config({"keys_file": str(path)}, None, {})


def test_a_keys_file_writable_by_its_group_is_refused(tmp_path: Path) -> None:
    # A group member could put a key of theirs under the current id and read what is encrypted next.
    path = keys_file(tmp_path / "keys.toml", f'[keys]\nk1 = "{b64(K1)}"\n', mode=0o660)

    with pytest.raises(ConfigurationError, match="writable by its group \\(mode -rw-rw----\\).*chmod 600"):
        codec_config({"keys_file": str(path)}, None, {})


def test_a_keys_file_readable_by_its_group_only_is_read(tmp_path: Path) -> None:
    path = keys_file(tmp_path / "keys.toml", f'[keys]\nk1 = "{b64(K1)}"\n', mode=0o640)

    assert codec_config({"keys_file": str(path)}, None, {}).keys == {"k1": K1}


def test_a_keys_file_that_is_not_utf8_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    path.write_bytes(b'[keys]\nk1 = "\xff"\n')
    path.chmod(0o600)

    with pytest.raises(ConfigurationError, match="keys.toml is not UTF-8 text \\(byte 13\\)"):
        codec_config({"keys_file": str(path)}, None, {})


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("keys.json", f'{{"keys": {{"k1": "{b64(K1)}", "k1": "{b64(K2)}"}}}}', "'k1' is given twice"),
        ("keys.json", f'{{"current": "k1", "current": "k2", "keys": {{"k1": "{b64(K1)}"}}}}', "'current' is given twice"),
        ("keys.toml", f'[keys]\nk1 = "{b64(K1)}"\nk1 = "{b64(K2)}"\n', "invalid TOML"),
        ("keys.toml", f'current = "k1"\ncurrent = "k2"\n[keys]\nk1 = "{b64(K1)}"\n', "invalid TOML"),
    ],
    ids=["json-key", "json-current", "toml-key", "toml-current"],
)
def test_a_keys_file_naming_a_key_id_or_a_setting_twice_is_refused(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    # json.loads keeps the last of two members silently: which of two keys would be k1?
    path = keys_file(tmp_path / name, text)

    with pytest.raises(ConfigurationError, match=message):
        codec_config({"keys_file": str(path)}, None, {})


def test_a_keys_file_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="keys file .*missing.toml does not exist"):
        codec_config({"keys_file": str(tmp_path / "missing.toml")}, None, {})


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("keys.toml", "[keys\n", "invalid TOML"),
        ("keys.json", "{", "invalid JSON"),
        ("keys.toml", f'[keys]\nk1 = "{b64(K1)}"\n[extra]\n', "unknown setting\\(s\\) extra"),
        ("keys.toml", 'current = "k1"\n', "'keys' must be a non-empty table"),
        ("keys.json", "[]", "must hold a table"),
        ("keys.toml", "[keys]\nk1 = 7\n", "key 'k1' must be a base64 string, not a int"),
    ],
)
def test_a_malformed_keys_file_is_refused(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = keys_file(tmp_path / name, text)

    with pytest.raises(ConfigurationError, match=message):
        codec_config({"keys_file": str(path)}, None, {})


def test_keys_in_the_environment_replace_the_keys_file(tmp_path: Path) -> None:
    path = keys_file(tmp_path / "keys.toml", f'[keys]\nfile-key = "{b64(K1)}"\n')

    config = codec_config({"keys_file": str(path)}, None, {"AGENTRT_CODEC_KEYS": env_keys(env_key=K2)})

    assert config.keys == {"env_key": K2} and config.current_key == "env_key"


def test_an_unknown_codec_setting_is_refused(tmp_path: Path) -> None:
    (tmp_path / "agentrt.toml").write_text('[codec]\nkey = "abc"\n')

    with pytest.raises(ConfigurationError, match="unknown setting\\(s\\) codec.key"):
        AgentrtConfig.load(tmp_path / "agentrt.toml", env={})


def test_the_configuration_repr_shows_no_key_material() -> None:
    config = codec_config({}, None, {"AGENTRT_CODEC_KEYS": env_keys(k1=K1)})

    assert b64(K1) not in repr(config) and repr(K1) not in repr(config)
    assert b64(K1) not in repr(config.codec())


def test_a_configuration_built_with_only_a_keys_file_reads_it_for_its_codec(tmp_path: Path) -> None:
    path = keys_file(tmp_path / "keys.toml", f'[keys]\nk1 = "{b64(K1)}"\n')

    codec = CodecConfig(keys_file=str(path)).codec()

    assert codec is not None and codec.key_ids == ("k1",)


def test_without_keys_there_is_no_codec() -> None:
    assert CodecConfig().codec() is None and not CodecConfig().enabled


# ---------------------------------------------------------------- the data converter


def encrypted_config(tmp_path: Path, threshold_bytes: int = 256 * 1024, **keys: bytes) -> AgentrtConfig:
    keys = keys or {"k1": K1}
    return AgentrtConfig(
        database_url=f"sqlite:///{tmp_path / 'agentrt.db'}",
        payloads=PayloadConfig(driver="directory", path=str(tmp_path / "payloads"), threshold_bytes=threshold_bytes),
        codec=CodecConfig(current_key=next(iter(keys)), keys=dict(keys)),
    )


async def test_the_converter_encrypts_every_payload_when_keys_are_configured(tmp_path: Path) -> None:
    converter = build_data_converter(encrypted_config(tmp_path))

    payloads = await converter.encode([SECRET, {"prompt": SECRET}, 42])

    assert all(p.metadata["encoding"] == b"binary/encrypted" for p in payloads)
    assert all(SECRET.encode() not in p.SerializeToString() for p in payloads)
    assert await converter.decode(payloads, [str, dict, int]) == [SECRET, {"prompt": SECRET}, 42]


async def test_a_big_payload_is_encrypted_before_it_is_offloaded_so_the_store_holds_ciphertext(tmp_path: Path) -> None:
    converter = build_data_converter(encrypted_config(tmp_path, threshold_bytes=1000))
    big = SECRET * 200

    (reference,) = await converter.encode([big])

    assert json.loads(reference.data)["driverName"] == "agentrt.directory"
    files = [f for f in (tmp_path / "payloads").rglob("*") if f.is_file()]
    assert len(files) == 1
    stored = Payload.FromString(files[0].read_bytes())
    assert stored.metadata["encoding"] == b"binary/encrypted" and stored.metadata["encryption-key-id"] == b"k1"
    assert SECRET.encode() not in files[0].read_bytes()
    assert await converter.decode([reference], [str]) == [big]


async def test_a_converter_with_keys_reads_payloads_written_before_encryption(tmp_path: Path) -> None:
    before = await build_data_converter(AgentrtConfig(database_url=f"sqlite:///{tmp_path / 'a.db'}")).encode([SECRET])

    assert await build_data_converter(encrypted_config(tmp_path)).decode(before, [str]) == [SECRET]


async def test_a_converter_without_keys_refuses_encrypted_payloads_naming_the_key(tmp_path: Path) -> None:
    encrypted = await build_data_converter(encrypted_config(tmp_path, k7=K1)).encode([SECRET])
    keyless = build_data_converter(AgentrtConfig(database_url=f"sqlite:///{tmp_path / 'a.db'}"))

    with pytest.raises(PayloadDecryptionError, match="'k7'.*no codec keys"):
        await keyless.decode(encrypted, [str])


async def test_failure_messages_and_stack_traces_are_encrypted_with_a_codec(tmp_path: Path) -> None:
    converter = build_data_converter(encrypted_config(tmp_path))
    failure = Failure()

    await converter.encode_failure(ApplicationError(f"could not do {SECRET}"), failure)

    assert SECRET.encode() not in failure.SerializeToString()
    assert failure.encoded_attributes.metadata["encoding"] == b"binary/encrypted"
    assert str(await converter.decode_failure(failure)) == f"could not do {SECRET}"


def test_workers_advertise_a_fingerprint_of_each_key_the_current_one_first(tmp_path: Path) -> None:
    storage = payload_storage(encrypted_config(tmp_path, k2=K2, k1=K1))

    codec_prints = [p for p in storage.reader_fingerprints if p.startswith("aes-gcm:")]

    assert codec_prints == [key_fingerprint("k2", K2), key_fingerprint("k1", K1)]
    assert storage.codec_fingerprint == key_fingerprint("k2", K2)
    assert "payloads encrypted (AES-256-GCM) with key 'k2'" in storage.describe()


def test_a_process_without_keys_advertises_no_key(tmp_path: Path) -> None:
    storage = AgentrtPlugin(AgentrtConfig(database_url=f"sqlite:///{tmp_path / 'a.db'}")).payload_storage

    assert storage.codec_fingerprint is None
    assert not [p for p in storage.reader_fingerprints if p.startswith("aes-gcm:")]
    assert storage.describe().endswith("payloads not encrypted")


def test_the_dev_server_gives_its_ui_the_codec_endpoint() -> None:
    command = DevServer(ui_port=8233, ui_codec_endpoint="http://127.0.0.1:8081").command()

    assert command[command.index("--ui-codec-endpoint") + 1] == "http://127.0.0.1:8081"
    assert "--ui-codec-endpoint" not in DevServer(ui_port=None, ui_codec_endpoint="http://127.0.0.1:8081").command()
