"""agentrt.toml and environment overrides."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client

from agentrt.schemas import AdvisorPolicy, ConfigurationError, Lanes, UnknownProfileError
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtPlugin, DevServer, PayloadConfig, build_worker


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agentrt.toml"
    path.write_text(text)
    return path


def test_profiles_and_sections_are_read_and_the_environment_wins(tmp_path: Path) -> None:
    path = write(tmp_path, """
default_profile = "local"
[profiles.local]
provider = "openai"
model = "qwen"
base_url = "http://127.0.0.1:11434/v1"
context_window = 32000
[temporal]
address = "temporal:7233"
task_queue = "agents"
[store]
url = "sqlite:///x.db"
""")
    config = AgentrtConfig.load(path, env={"AGENTRT_TASK_QUEUE": "override"})
    assert config.default_profile == "local"
    assert config.profile("local").context_window == 32000
    assert config.temporal_address == "temporal:7233"
    assert config.task_queue == "override"
    assert config.database_url == f"sqlite:///{tmp_path / 'x.db'}"  # relative to the file's directory
    assert config.profile("scripted").provider == "scripted"


def test_a_misspelt_top_level_setting_is_an_error_not_silently_ignored(tmp_path: Path) -> None:
    path = write(tmp_path, 'default_profle = "x"\n[temporal]\nadress = "h:1"\n')
    with pytest.raises(ConfigurationError, match="unknown setting\\(s\\) default_profle, temporal.adress"):
        AgentrtConfig.load(path, env={})


def test_a_bad_profile_field_names_the_file_and_profile(tmp_path: Path) -> None:
    path = write(tmp_path, '[profiles.bad]\nprovider = "openai"\ncontext_windw = 5\n')
    with pytest.raises(ConfigurationError, match="profile 'bad' is invalid"):
        AgentrtConfig.load(path, env={})


def test_a_named_config_file_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        AgentrtConfig.load(env={"AGENTRT_CONFIG": str(tmp_path / "nope.toml")})


def test_a_config_file_that_is_not_utf8_is_a_configuration_error_naming_the_byte(tmp_path: Path) -> None:
    file = tmp_path / "agentrt.toml"
    file.write_bytes(b'default_profile = "a"\n# \xff\xfe\n')
    with pytest.raises(ConfigurationError, match=r"agentrt.toml: not UTF-8 text \(byte 24\)"):
        AgentrtConfig.load(file, env={})


def test_gateway_telemetry_and_codec_sections_reject_unknown_settings(tmp_path: Path) -> None:
    for section in ("gateway", "telemetry", "codec"):
        file = tmp_path / f"{section}.toml"
        file.write_text(f"[{section}]\nbogus = 1\n")
        with pytest.raises(ConfigurationError, match=f"{section}.bogus"):
            AgentrtConfig.load(file, env={})


def test_an_unknown_profile_lists_the_known_ones() -> None:
    with pytest.raises(UnknownProfileError, match="configured profiles: scripted"):
        AgentrtConfig().profile("gpt-9")


def test_payloads_default_to_the_store_driver_at_256_kib(tmp_path: Path) -> None:
    config = AgentrtConfig.load(write(tmp_path, ""), env={"AGENTRT_HOME": str(tmp_path / "home")})
    assert (config.payloads.driver, config.payloads.path, config.payloads.threshold_bytes) == (
        "store", str(tmp_path / "home" / "payloads"), 262144,
    )


# ---------------------------------------------------------------- AGENTRT_HOME and the file lookup


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory without an agentrt.toml."""
    directory = tmp_path / "elsewhere"
    directory.mkdir()
    monkeypatch.chdir(directory)
    return directory


def test_without_any_file_the_store_and_payloads_live_in_agentrt_home(tmp_path: Path, elsewhere: Path) -> None:
    home = tmp_path / "home"
    config = AgentrtConfig.load(env={"AGENTRT_HOME": str(home)})
    assert config.source is None
    assert config.database_url == f"sqlite:///{home / 'agentrt.db'}"
    assert config.payloads.path == str(home / "payloads")


def test_the_agentrt_toml_in_agentrt_home_is_read_from_any_working_directory(tmp_path: Path, elsewhere: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    write(home, '[temporal]\ntask_queue = "from-home"\n')
    config = AgentrtConfig.load(env={"AGENTRT_HOME": str(home)})
    assert config.source == home / "agentrt.toml"
    assert config.task_queue == "from-home"


def test_an_agentrt_toml_in_the_working_directory_wins_over_the_one_in_agentrt_home(tmp_path: Path, elsewhere: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    write(home, '[temporal]\ntask_queue = "from-home"\n')
    write(elsewhere, '[temporal]\ntask_queue = "from-cwd"\n')
    config = AgentrtConfig.load(env={"AGENTRT_HOME": str(home)})
    assert config.source == elsewhere / "agentrt.toml"
    assert config.task_queue == "from-cwd"


def test_agentrt_config_wins_over_the_working_directory_and_agentrt_home(tmp_path: Path, elsewhere: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    write(home, '[temporal]\ntask_queue = "from-home"\n')
    write(elsewhere, '[temporal]\ntask_queue = "from-cwd"\n')
    named = tmp_path / "named"
    named.mkdir()
    write(named, '[temporal]\ntask_queue = "named"\n')
    config = AgentrtConfig.load(env={"AGENTRT_HOME": str(home), "AGENTRT_CONFIG": str(named / "agentrt.toml")})
    assert config.task_queue == "named"


def test_relative_store_and_payload_paths_in_a_file_are_taken_from_its_directory(tmp_path: Path, elsewhere: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    write(home, '[store]\nurl = "sqlite:///state/agentrt.db"\n[payloads]\ndriver = "directory"\npath = "blobs"\n')
    config = AgentrtConfig.load(env={"AGENTRT_HOME": str(home)})
    assert config.database_url == f"sqlite:///{home / 'state' / 'agentrt.db'}"
    assert config.payloads.path == str(home / "blobs")


def test_a_postgresql_store_url_in_a_file_is_kept_as_written(tmp_path: Path) -> None:
    path = write(tmp_path, '[store]\nurl = "postgresql+psycopg://agentrt:secret@db:5432/agentrt"\n')
    assert AgentrtConfig.load(path, env={}).database_url == "postgresql+psycopg://agentrt:secret@db:5432/agentrt"


def test_the_environment_database_url_wins_over_the_home_default(tmp_path: Path, elsewhere: Path) -> None:
    config = AgentrtConfig.load(env={"AGENTRT_HOME": str(tmp_path / "home"), "AGENTRT_DATABASE_URL": "sqlite:////srv/a.db"})
    assert config.database_url == "sqlite:////srv/a.db"


def test_the_payloads_section_is_read_and_the_environment_wins(tmp_path: Path) -> None:
    path = write(tmp_path, '[payloads]\ndriver = "directory"\npath = "/srv/payloads"\nthreshold_bytes = 1024\n')
    assert AgentrtConfig.load(path, env={}).payloads == PayloadConfig(driver="directory", path="/srv/payloads", threshold_bytes=1024)
    overridden = AgentrtConfig.load(path, env={"AGENTRT_PAYLOAD_DRIVER": "store", "AGENTRT_PAYLOAD_PATH": "/mnt/p"})
    assert overridden.payloads == PayloadConfig(driver="store", path="/mnt/p", threshold_bytes=1024)


def test_a_misspelt_payloads_setting_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, '[payloads]\ndriver = "store"\nthreshold = 10\n')
    with pytest.raises(ConfigurationError, match=r"unknown setting\(s\) payloads.threshold;.*\[payloads\] driver/path/threshold_bytes"):
        AgentrtConfig.load(path, env={})


def test_an_unknown_payload_driver_is_an_error_in_the_file_and_in_the_environment(tmp_path: Path) -> None:
    path = write(tmp_path, '[payloads]\ndriver = "gcs"\n')
    with pytest.raises(ConfigurationError, match="payload driver must be one of store, directory, s3, none, not 'gcs'"):
        AgentrtConfig.load(path, env={})
    with pytest.raises(ConfigurationError, match="AGENTRT_PAYLOAD_DRIVER: payload driver must be one of"):
        AgentrtConfig.load(write(tmp_path, ""), env={"AGENTRT_PAYLOAD_DRIVER": "disk"})


@pytest.mark.parametrize("value", ["-1", '"big"', "true", "1.5"])
def test_a_threshold_that_is_not_a_non_negative_integer_is_an_error(tmp_path: Path, value: str) -> None:
    path = write(tmp_path, f"[payloads]\nthreshold_bytes = {value}\n")
    with pytest.raises(ConfigurationError, match="threshold_bytes must be an integer >= 0"):
        AgentrtConfig.load(path, env={})


def test_payloads_that_is_not_a_table_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, 'payloads = "store"\n')
    with pytest.raises(ConfigurationError, match=r"payloads must be a table"):
        AgentrtConfig.load(path, env={})


def test_a_profile_whose_output_does_not_fit_its_window_is_a_configuration_error(tmp_path: Path) -> None:
    file = tmp_path / "agentrt.toml"
    file.write_text('[profiles.inverted]\nprovider = "scripted"\ncontext_window = 4000\nmax_output_tokens = 8000\n')
    with pytest.raises(ConfigurationError, match=r"max_output_tokens \(8000\) must be smaller than context_window \(4000\)"):
        AgentrtConfig.load(file, env={})


def test_a_profile_with_a_zero_window_is_a_configuration_error(tmp_path: Path) -> None:
    file = tmp_path / "agentrt.toml"
    file.write_text('[profiles.zero]\nprovider = "scripted"\ncontext_window = 0\n')
    with pytest.raises(ConfigurationError, match="profile 'zero' is invalid"):
        AgentrtConfig.load(file, env={})


def test_the_advisor_section_is_read_and_off_by_default(tmp_path: Path) -> None:
    assert AgentrtConfig.load(write(tmp_path, ""), env={}).advisor == AdvisorPolicy()
    path = write(tmp_path, '[profiles.judge]\nprovider = "scripted"\n[advisor]\nmode = "lightweight"\nprofile = "judge"\ntimeout_seconds = 20\n')
    assert AgentrtConfig.load(path, env={}).advisor == AdvisorPolicy(mode="lightweight", profile="judge", timeout_seconds=20)


def test_a_misspelt_advisor_setting_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, '[advisor]\nmode = "full"\ntimeout = 5\n')
    with pytest.raises(ConfigurationError, match=r"unknown setting\(s\) advisor.timeout;.*\[advisor\] mode/profile/timeout_seconds"):
        AgentrtConfig.load(path, env={})


@pytest.mark.parametrize(
    "body, message",
    [
        ('mode = "always"', r"\[advisor\] is invalid: mode: Input should be 'off', 'lightweight' or 'full'"),
        ("timeout_seconds = 0", r"\[advisor\] is invalid: timeout_seconds: Input should be greater than 0"),
        ("timeout_seconds = nan", r"\[advisor\] is invalid: timeout_seconds"),
    ],
)
def test_an_invalid_advisor_value_is_an_error(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        AgentrtConfig.load(write(tmp_path, f"[advisor]\n{body}\n"), env={})


def test_an_advisor_profile_that_is_not_configured_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, '[advisor]\nmode = "full"\nprofile = "judge"\n')
    with pytest.raises(UnknownProfileError, match=r"unknown model profile 'judge'.*\[advisor\] profile in"):
        AgentrtConfig.load(path, env={})


def test_advisor_that_is_not_a_table_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"advisor must be a table"):
        AgentrtConfig.load(write(tmp_path, 'advisor = "full"\n'), env={})


def test_mcp_servers_and_skill_paths_are_read_relative_paths_from_the_file_s_directory(tmp_path: Path) -> None:
    file = tmp_path / "agentrt.toml"
    file.write_text(
        '[mcp.servers.everything]\ncommand = "node"\nargs = ["x.js", "stdio"]\nenv = { TOKEN = "${MY_TOKEN}" }\n'
        'cwd = "srv"\nread_paths = ["lib"]\ntrust = "untrusted"\nrisk = { echo = "read_only" }\n'
        '[mcp.servers.web]\nurl = "http://127.0.0.1:3001/mcp"\nheaders = { Authorization = "Bearer ${T}" }\n'
        '[skills]\npaths = ["skills"]\n'
    )
    config = AgentrtConfig.load(file, env={})
    everything = config.mcp_servers["everything"]
    assert (everything.transport, everything.trust, everything.risk) == ("stdio", "untrusted", {"echo": "read_only"})
    assert (everything.cwd, everything.read_paths) == (str(tmp_path / "srv"), [str(tmp_path / "lib")])
    assert everything.env == {"TOKEN": "${MY_TOKEN}"}  # expanded by the worker when the server starts, never here
    assert config.mcp_servers["web"].transport == "http"
    assert config.skill_paths == [str(tmp_path / "skills")]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('command = "x"\nurl = "http://y"', "give either command"),
        ('command = "x"\nenv = { K = "${lower-case}" }', "not a variable reference"),
        ('command = "x"\nenv = { K = "${}" }', "not a variable reference"),
        ('url = "ftp://y"', "must start with http"),
        ('command = "x"\ntrust = "maybe"', "trust"),
    ],
)
def test_an_invalid_mcp_server_names_the_file_the_server_and_the_problem(tmp_path: Path, table: str, message: str) -> None:
    file = tmp_path / "agentrt.toml"
    file.write_text(f"[mcp.servers.bad]\n{table}\n")
    with pytest.raises(ConfigurationError, match=message) as caught:
        AgentrtConfig.load(file, env={})
    assert str(file) in str(caught.value) and "[mcp.servers.bad]" in str(caught.value)


def test_a_server_named_like_a_built_in_tool_prefix_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "agentrt.toml"
    file.write_text('[mcp.servers.fs]\ncommand = "x"\n')
    with pytest.raises(ConfigurationError, match="names built-in tools"):
        AgentrtConfig.load(file, env={})


def test_the_secrets_table_is_read_and_a_relative_path_is_taken_from_the_file_s_directory(tmp_path: Path) -> None:
    path = write(tmp_path, '[secrets]\nsources = ["file", "hook", "env"]\npath = "secrets.toml"\nhook = "vault:get"\ntimeout_seconds = 3\n')

    secrets = AgentrtConfig.load(path, env={}).secrets

    assert secrets.sources == ["file", "hook", "env"] and secrets.path == str(tmp_path / "secrets.toml")
    assert (secrets.hook, secrets.timeout_seconds) == ("vault:get", 3)
    assert AgentrtConfig.load(write(tmp_path, ""), env={}).secrets.sources == ["env"]  # the default


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ('sources = ["vault"]', "sources"),
        ('sources = ["file"]', 'source "file" needs path'),
        ('sources = ["hook"]', 'source "hook" needs hook'),
        ('sources = ["hook"]\nhook = "no colon"', "hook must be"),
        ('sources = ["env", "env"]', "names a source twice"),
        ("pth = 'x'", "pth"),
    ],
)
def test_a_bad_secrets_table_is_a_configuration_error_naming_it(tmp_path: Path, table: str, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=r"\[secrets\] is invalid: .*" + problem):
        AgentrtConfig.load(write(tmp_path, f"[secrets]\n{table}\n"), env={})


def test_the_sandbox_s_egress_allow_list_is_read_and_checked(tmp_path: Path) -> None:
    config = AgentrtConfig.load(write(tmp_path, '[sandbox]\negress_allow = ["registry.internal:443", "10.0.0.0/8:*"]\n'), env={})

    assert config.egress_allow == ["registry.internal:443", "10.0.0.0/8:*"]
    assert AgentrtConfig.load(write(tmp_path, ""), env={}).egress_allow == []
    delegated = AgentrtConfig.load(write(tmp_path, '[sandbox]\ncgroup = "/sys/fs/cgroup/agentrt/calls"\n'), env={})
    assert (delegated.sandbox_cgroup, config.sandbox_cgroup) == ("/sys/fs/cgroup/agentrt/calls", None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[sandbox]\negress_allow = ["127.0.0.1"]\n', "is not HOST:PORT"),
        ('[sandbox]\negress_allow = ["127.0.0.1:https"]\n', "no valid port"),
        ('[sandbox]\negress_allow = "127.0.0.1:80"\n', "must be a list"),
        ('[sandbox]\nnetwork = true\n', "holds only egress_allow"),
        ('[sandbox]\ncgroup = "calls"\n', "must be an absolute path"),
    ],
)
def test_a_bad_egress_allow_list_is_a_configuration_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        AgentrtConfig.load(write(tmp_path, text), env={})


def test_quotas_and_tenants_are_read_into_one_policy(tmp_path: Path) -> None:
    path = tmp_path / "agentrt.toml"
    path.write_text(
        '[tenants]\nalice = "acme"\n\n[quotas]\ntokens_per_day = 1000\n\n'
        "[quotas.tenants.acme]\ncost_usd_per_day = 2.5\nconcurrent_sessions = 3\n"
    )
    quotas = AgentrtConfig.load(path, env={}).quotas
    assert quotas.tenant_of("alice") == "acme" and quotas.default.tokens_per_day == 1000
    assert quotas.limits("acme").model_dump() == {
        "concurrent_sessions": 3, "tokens_per_day": 1000, "cost_usd_per_day": 2.5, "tool_calls_per_day": None,
    }


@pytest.mark.parametrize(
    ("toml", "problem"),
    [
        ("[quotas]\ntokens_a_day = 5\n", r"\[quotas\] has unknown setting\(s\) tokens_a_day"),
        ("[quotas]\ntokens_per_day = -5\n", r"\[quotas\] is invalid: tokens_per_day"),
        ("[quotas.tenants.acme]\ncost_usd_per_day = \"lots\"\n", r"\[quotas.tenants.acme\] is invalid"),
        ('[tenants]\nalice = 5\n', r"\[tenants\] maps owner names to tenant names"),
    ],
)
def test_a_bad_quota_setting_is_a_configuration_error_naming_it(tmp_path: Path, toml: str, problem: str) -> None:
    path = tmp_path / "agentrt.toml"
    path.write_text(toml)
    with pytest.raises(ConfigurationError, match=problem):
        AgentrtConfig.load(path, env={})


def test_the_s3_payload_settings_are_read_from_the_file_and_the_environment_wins(tmp_path: Path) -> None:
    path = write(tmp_path, '[payloads]\ndriver = "s3"\nbucket = "payloads-a"\nendpoint_url = "http://127.0.0.1:9000"\nregion = "eu-west-1"\n')
    read = AgentrtConfig.load(path, env={}).payloads
    assert (read.driver, read.bucket, read.endpoint_url, read.region) == ("s3", "payloads-a", "http://127.0.0.1:9000", "eu-west-1")
    overridden = AgentrtConfig.load(path, env={
        "AGENTRT_PAYLOAD_BUCKET": "payloads-b", "AGENTRT_PAYLOAD_ENDPOINT_URL": "https://s3.example.test", "AGENTRT_PAYLOAD_REGION": "us-east-2",
    }).payloads
    assert (overridden.driver, overridden.bucket, overridden.endpoint_url, overridden.region) == (
        "s3", "payloads-b", "https://s3.example.test", "us-east-2"
    )
    from_env = AgentrtConfig.load(write(tmp_path, ""), env={"AGENTRT_PAYLOAD_DRIVER": "s3", "AGENTRT_PAYLOAD_BUCKET": "payloads-c"}).payloads
    assert (from_env.driver, from_env.bucket, from_env.endpoint_url) == ("s3", "payloads-c", None)


def test_the_s3_driver_without_a_bucket_is_an_error_naming_both_settings(tmp_path: Path) -> None:
    path = write(tmp_path, '[payloads]\ndriver = "s3"\nendpoint_url = "http://127.0.0.1:9000"\n')
    with pytest.raises(ConfigurationError) as raised:
        AgentrtConfig.load(path, env={})
    assert str(raised.value) == f'{path}: [payloads] driver = "s3" needs a bucket: set [payloads] bucket or AGENTRT_PAYLOAD_BUCKET'
    with pytest.raises(ConfigurationError, match=r'\[payloads\] driver = "s3" needs a bucket'):
        AgentrtConfig.load(write(tmp_path, ""), env={"AGENTRT_PAYLOAD_DRIVER": "s3"})


def test_an_s3_setting_of_the_wrong_kind_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"\[payloads\] bucket must be a non-empty string, not 7"):
        AgentrtConfig.load(write(tmp_path, '[payloads]\ndriver = "s3"\nbucket = 7\n'), env={})
    with pytest.raises(ConfigurationError, match=r"\[payloads\] endpoint_url must be an http:// or https:// URL, not 'localhost:9000'"):
        AgentrtConfig.load(write(tmp_path, '[payloads]\ndriver = "s3"\nbucket = "b-1"\nendpoint_url = "localhost:9000"\n'), env={})
    with pytest.raises(ConfigurationError, match=r"unknown setting\(s\) payloads.key_prefix;.*bucket/endpoint_url/region"):
        AgentrtConfig.load(write(tmp_path, '[payloads]\nbucket = "b-1"\nkey_prefix = "p/"\n'), env={})


def test_the_model_task_queue_is_read_and_the_environment_wins(tmp_path: Path) -> None:
    path = write(tmp_path, '[temporal]\ntask_queue = "agents"\ntool_task_queue = "agents-tools"\nmodel_task_queue = "agents-models"\n')
    assert AgentrtConfig.load(path, env={}).model_task_queue == "agents-models"
    assert AgentrtConfig.load(path, env={"AGENTRT_MODEL_TASK_QUEUE": "m2"}).model_task_queue == "m2"
    assert AgentrtConfig.load(write(tmp_path, ""), env={}).model_task_queue is None


def test_the_sticky_timeout_is_three_seconds_unless_the_worker_table_or_the_environment_says_otherwise(tmp_path: Path) -> None:
    assert AgentrtConfig.load(write(tmp_path, ""), env={}).sticky_schedule_to_start_seconds == 3.0
    path = write(tmp_path, "[worker]\nsticky_schedule_to_start_seconds = 1.5\n")
    assert AgentrtConfig.load(path, env={}).sticky_schedule_to_start_seconds == 1.5
    env = {"AGENTRT_STICKY_SCHEDULE_TO_START_SECONDS": "10"}
    assert AgentrtConfig.load(path, env=env).sticky_schedule_to_start_seconds == 10.0


@pytest.mark.parametrize("value", ["0", "-1", "61", '"3"', "true"])
def test_a_sticky_timeout_out_of_bounds_is_a_configuration_error_naming_it(tmp_path: Path, value: str) -> None:
    path = write(tmp_path, f"[worker]\nsticky_schedule_to_start_seconds = {value}\n")
    with pytest.raises(ConfigurationError, match="sticky_schedule_to_start_seconds must be a number of seconds above 0"):
        AgentrtConfig.load(path, env={})


def test_a_sticky_timeout_in_the_environment_that_is_not_a_number_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="AGENTRT_STICKY_SCHEDULE_TO_START_SECONDS must be a number"):
        AgentrtConfig.load(env={"AGENTRT_STICKY_SCHEDULE_TO_START_SECONDS": "soon"})


def test_the_workflow_task_slots_are_the_sdks_unless_the_worker_table_or_the_environment_says_otherwise(tmp_path: Path) -> None:
    assert AgentrtConfig.load(write(tmp_path, ""), env={}).max_concurrent_workflow_tasks is None
    path = write(tmp_path, "[worker]\nmax_concurrent_workflow_tasks = 8\n")
    assert AgentrtConfig.load(path, env={}).max_concurrent_workflow_tasks == 8
    env = {"AGENTRT_MAX_CONCURRENT_WORKFLOW_TASKS": "16"}
    assert AgentrtConfig.load(path, env=env).max_concurrent_workflow_tasks == 16


@pytest.mark.parametrize("value", ["1", "1001", "2.5", '"8"', "false"])
def test_workflow_task_slots_out_of_bounds_are_a_configuration_error_naming_them(tmp_path: Path, value: str) -> None:
    path = write(tmp_path, f"[worker]\nmax_concurrent_workflow_tasks = {value}\n")
    with pytest.raises(ConfigurationError, match="max_concurrent_workflow_tasks must be a whole number from 2 to 1000"):
        AgentrtConfig.load(path, env={})


def test_the_activity_slots_are_32_unless_the_worker_table_or_the_environment_says_otherwise(tmp_path: Path) -> None:
    assert AgentrtConfig.load(write(tmp_path, ""), env={}).max_concurrent_activities == 32
    path = write(tmp_path, "[worker]\nmax_concurrent_activities = 400\n")
    assert AgentrtConfig.load(path, env={}).max_concurrent_activities == 400
    assert AgentrtConfig.load(path, env={"AGENTRT_MAX_CONCURRENT_ACTIVITIES": "800"}).max_concurrent_activities == 800


@pytest.mark.parametrize("value", ["0", "5001", "2.5", '"8"', "true"])
def test_activity_slots_out_of_bounds_are_a_configuration_error_naming_them(tmp_path: Path, value: str) -> None:
    path = write(tmp_path, f"[worker]\nmax_concurrent_activities = {value}\n")
    with pytest.raises(ConfigurationError, match="max_concurrent_activities must be a whole number from 1 to 5000"):
        AgentrtConfig.load(path, env={})


def test_the_sticky_cache_is_the_sdks_unless_the_worker_table_or_the_environment_says_otherwise(tmp_path: Path) -> None:
    assert AgentrtConfig.load(write(tmp_path, ""), env={}).max_cached_workflows == 1000
    path = write(tmp_path, "[worker]\nmax_cached_workflows = 100\n")
    assert AgentrtConfig.load(path, env={}).max_cached_workflows == 100
    assert AgentrtConfig.load(path, env={"AGENTRT_MAX_CACHED_WORKFLOWS": "0"}).max_cached_workflows == 0
    with pytest.raises(ConfigurationError, match="max_cached_workflows must be a whole number from 0 to 100000"):
        AgentrtConfig.load(write(tmp_path, "[worker]\nmax_cached_workflows = -1\n"), env={})


async def test_a_worker_runs_as_many_activities_at_once_as_its_configuration_says(temporal_server: DevServer, tmp_path: Path) -> None:
    config = AgentrtConfig.load(write(tmp_path, "[worker]\nmax_concurrent_activities = 7\nmax_cached_workflows = 50\n"), env={})
    with Store.open(f"sqlite:///{tmp_path / 'agentrt.db'}") as store:
        client = await Client.connect(temporal_server.address, plugins=[AgentrtPlugin(config, store)])
        worker = build_worker(client, config, store, task_queue="q")
        assert worker.config()["max_concurrent_activities"] == 7
        assert worker.config()["max_cached_workflows"] == 50


def test_the_lanes_are_read_from_their_table_and_default_to_sessions_first(tmp_path: Path) -> None:
    assert AgentrtConfig.load(write(tmp_path, ""), env={}).lanes == Lanes()
    path = write(tmp_path, '[lanes]\ninteractive = 1\ngraph = 5\nfairness = "owner"\n\n[lanes.weights]\nacme = 4.0\n')

    lanes = AgentrtConfig.load(path, env={}).lanes

    assert (lanes.interactive, lanes.task, lanes.graph, lanes.fairness, lanes.weights) == (1, 3, 5, "owner", {"acme": 4.0})


@pytest.mark.parametrize(
    ("toml", "problem"),
    [
        ("[lanes]\ninteractive = 7\n", r"\[lanes\] is invalid: interactive: .*priority key is an integer from 1 \(runs first\) to 5"),
        ("[lanes]\ntask = 0\n", r"\[lanes\] is invalid: task: .*from 1 \(runs first\) to 5 \(runs last\), not 0"),
        ("[lanes]\ngraph = 2.5\n", r"\[lanes\] is invalid: graph: .*not 2.5"),
        ('[lanes]\nfairness = "team"\n', r"\[lanes\] is invalid: fairness: Input should be 'tenant', 'owner' or 'off'"),
        ("[lanes.weights]\nacme = 5000\n", r"\[lanes\] is invalid: weights: .*the weight of 'acme' is from 0.001 to 1000"),
        ("[lanes]\nbatch = 5\n", r"\[lanes\] has unknown setting\(s\) batch; known: enabled, interactive, task, graph"),
        ("lanes = 3\n", r"lanes must be a table \(\[lanes\]\)"),
    ],
)
def test_a_bad_lane_setting_is_a_configuration_error_naming_it(tmp_path: Path, toml: str, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem):
        AgentrtConfig.load(write(tmp_path, toml), env={})
