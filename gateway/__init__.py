"""The HTTP side of agentrt, above ``agentrt.client``: the gateway (``create_app``, run by
``agentrt serve``), its live streams (SSE and AG-UI, ``StreamHub``), signed webhooks
(``WebhookDispatcher``, ``verify_webhook`` for receivers) and the Temporal UI's codec server
(``codec_app``, run by ``agentrt codec-server``)."""

from agentrt.gateway._app import LocalCallersOnly, check_authentication, create_app, is_loopback
from agentrt.gateway._codec_server import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_PAYLOADS,
    DEFAULT_UI_ORIGINS,
    CodecServerSettings,
    codec_app,
)
from agentrt.gateway._stream import StreamHub, StreamItem, StreamSubscription, stream_response
from agentrt.gateway._webhook_signing import sign_webhook, signed_headers, verify_webhook
from agentrt.gateway._webhooks import WebhookDispatcher
from agentrt.gateway._workspaces import WorkspaceClaims, check_workspace_root, protected_paths

__all__ = [
    "CodecServerSettings",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_PAYLOADS",
    "DEFAULT_UI_ORIGINS",
    "LocalCallersOnly",
    "StreamHub",
    "StreamItem",
    "StreamSubscription",
    "WebhookDispatcher",
    "WorkspaceClaims",
    "check_authentication",
    "check_workspace_root",
    "codec_app",
    "create_app",
    "is_loopback",
    "protected_paths",
    "sign_webhook",
    "signed_headers",
    "stream_response",
    "verify_webhook",
]
