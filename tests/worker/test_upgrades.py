"""Upgrades' visibility query: the deployment's running sessions and tasks on other builds, with
names quoted as string literals (a quote in a name cannot widen the query); and the names and
build ids a versioned worker refuses at its start (Temporal would never register them)."""

from __future__ import annotations

import re

import pytest
from temporalio.worker import WorkerDeploymentVersion

from agentrt.schemas import ConfigurationError
from agentrt.worker import check_deployment_version
from agentrt.worker._upgrades import Upgrades


def upgrades(name: str, build: str) -> Upgrades:
    return Upgrades(None, WorkerDeploymentVersion(deployment_name=name, build_id=build))  # type: ignore[arg-type]


def test_the_query_names_the_deployment_and_excludes_this_build() -> None:
    assert upgrades("agentrt", "2026-12-06.1").query() == (
        "ExecutionStatus = 'Running' AND WorkflowType IN ('SessionWorkflow', 'AutonomousTaskWorkflow', 'TaskGraphWorkflow') "
        "AND TemporalWorkerDeployment = 'agentrt' AND TemporalWorkerDeploymentVersion != 'agentrt:2026-12-06.1'"
    )


def test_a_quote_in_a_name_stays_inside_its_literal() -> None:
    query = upgrades("it's' OR 'a'='a", "b").query()
    assert "TemporalWorkerDeployment = 'it\\'s\\' OR \\'a\\'=\\'a'" in query


def test_a_backslash_cannot_be_put_in_the_query() -> None:
    with pytest.raises(ConfigurationError, match="backslash"):
        upgrades("agent\\rt", "b").query()




@pytest.mark.parametrize(
    ("name", "build", "said"),
    [
        ("my.dep", "b1", "deployment name 'my.dep' holds a '.'"),
        ("back\\slash", "b1", "holds a backslash"),
        ("d" * 300, "b1", "is longer than 255 bytes"),
        ("agentrt", "__unversioned__", "Temporal's name for unversioned workers"),
        ("__unversioned__", "1", "begins with '__': Temporal reserves such names"),
        ("__x", "1", "begins with '__'"),
        ("agentrt", "b\n1", "holds a control character"),
        (" agentrt", "b1", "begins or ends with a space"),
        ("agentrt", "", "build id '' is empty"),
    ],
)
def test_a_version_temporal_would_never_register_is_refused(name: str, build: str, said: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(said)):
        check_deployment_version(WorkerDeploymentVersion(deployment_name=name, build_id=build))


@pytest.mark.parametrize(("name", "build"), [("agentrt", "2026-12-06.1"), ("it's", "o'ne"), ("déploi ement 日本", "ビルド 1")])
def test_names_temporal_takes_pass(name: str, build: str) -> None:
    check_deployment_version(WorkerDeploymentVersion(deployment_name=name, build_id=build))
