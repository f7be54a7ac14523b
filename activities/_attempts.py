"""Which worker process ran an activity attempt: every heartbeat of a model or tool call names it.

A retried attempt reads the last heartbeat of the attempt before it
(``activity.info().heartbeat_details``, Temporal carries it to the next attempt). When that
names another process, or there is none, the attempt before may have died with its
worker, and the workflow's sticky queue may point at that dead worker (see
``agentrt.worker.ResumeInterceptor``).
"""

from __future__ import annotations

import os
import socket
import uuid

from temporalio import activity

# host/pid/random: a restarted container keeps its host name and often its pid (1).
WORKER_PROCESS = f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:12]}"


def heartbeat() -> None:
    """``activity.heartbeat`` with this process's ``WORKER_PROCESS`` as the details."""
    activity.heartbeat(WORKER_PROCESS)


def previous_attempt_elsewhere(info: activity.Info) -> bool:
    """True for a retry (``attempt > 1``) of a regular activity whose previous attempt's last
    heartbeat came from another worker process or that sent none; False otherwise."""
    if info.attempt <= 1 or info.is_local:
        return False
    details = list(info.heartbeat_details or ())
    return not details or details[0] != WORKER_PROCESS
