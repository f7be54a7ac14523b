"""The gateway's interactive API docs, ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), served with
their scripts, styles and icon from the gateway itself.

FastAPI's own docs pages load Swagger UI and ReDoc from a CDN (and ReDoc its fonts from Google),
so on a machine without internet access they are blank. The files come from the
``fastapi-offline`` package, mounted under ``/docs/assets``.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.staticfiles import StaticFiles
from starlette.responses import HTMLResponse

__all__ = ["DOCS_ASSETS", "install_docs"]

DOCS_ASSETS = "/docs/assets"
# Swagger UI's and ReDoc's bundles and a favicon, shipped in this package's folder.
ASSETS_PACKAGE = ("fastapi_offline", "static")


def install_docs(app: FastAPI, docs_url: str = "/docs", redoc_url: str = "/redoc") -> None:
    """Serve ``docs_url`` and ``redoc_url`` for ``app``'s OpenAPI schema, and their files under
    ``DOCS_ASSETS``. ``app`` is made with ``docs_url=None, redoc_url=None`` (FastAPI's CDN pages);
    neither page needs authentication, as FastAPI's do not."""
    app.mount(DOCS_ASSETS, StaticFiles(packages=[ASSETS_PACKAGE]), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    def root(request: Request) -> str:
        return str(request.scope.get("root_path", "")).rstrip("/")

    @app.get(docs_url, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        assets = root(request) + DOCS_ASSETS
        return get_swagger_ui_html(
            openapi_url=root(request) + openapi_url, title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{assets}/swagger-ui-bundle.js", swagger_css_url=f"{assets}/swagger-ui.css",
            swagger_favicon_url=f"{assets}/favicon.png",
            # validatorUrl: Swagger UI would otherwise show a badge fetched from validator.swagger.io
            swagger_ui_parameters={**(app.swagger_ui_parameters or {}), "validatorUrl": None},
        )

    @app.get(redoc_url, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        assets = root(request) + DOCS_ASSETS
        return get_redoc_html(
            openapi_url=root(request) + openapi_url, title=f"{app.title} - ReDoc",
            redoc_js_url=f"{assets}/redoc.standalone.js", redoc_favicon_url=f"{assets}/favicon.png",
            with_google_fonts=False,
        )
