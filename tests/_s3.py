"""An S3-compatible server on loopback for the s3 payload driver's tests: moto's server mode
(``python -m moto.server``), a process of its own on a free port, with test credentials in the
environment (inherited by the worker processes the tests start) and no ~/.aws of the user's."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import boto3
import pytest

__all__ = ["S3Server", "s3_server"]

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "agentrt-test",
    "AWS_SECRET_ACCESS_KEY": "agentrt-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


@dataclass
class S3Server:
    endpoint_url: str

    def client(self):  # noqa: ANN201 (boto3's client type is generated)
        return boto3.client("s3", endpoint_url=self.endpoint_url)

    def create_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str) -> list[str]:
        """Every object key in ``bucket``."""
        listed = self.client().list_objects_v2(Bucket=bucket)
        return [o["Key"] for o in listed.get("Contents", [])]

    def read(self, bucket: str, key: str) -> bytes:
        return self.client().get_object(Bucket=bucket, Key=key)["Body"].read()


@contextmanager
def moto_server() -> Iterator[S3Server]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not start on port {port} (exit {process.poll()})") from None
                time.sleep(0.05)
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def s3_server() -> Iterator[S3Server]:
    """A moto S3 server for the module, with test AWS credentials in this process's environment."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in CREDENTIALS.items():
            patch.setenv(name, value)
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
            patch.delenv(name, raising=False)
        with moto_server() as server:
            yield server
