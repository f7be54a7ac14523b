"""Tools from plain functions: ``@tool`` reads a function's signature and docstring into a
``Tool`` whose arguments pydantic validates, so a user's tool runs through the same registry,
policy, approvals, effect ledger and trajectory as a built-in one.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from typing import Annotated, Any, ClassVar, Literal, get_args, get_origin, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, PydanticSchemaGenerationError, create_model
from pydantic.fields import FieldInfo
from pydantic_core import PydanticSerializationError, to_json

from agentrt.activities.tools._registry import Tool, ToolContext, ToolOutput
from agentrt.activities.tools._secrets import redact_secrets
from agentrt.schemas import SECRET_NAME, ConfigurationError, ToolError

__all__ = ["FunctionTool", "tool", "docstring_parts"]

Risk = Literal["read_only", "idempotent", "effectful"]
# Parameter names that say "the call's context": unannotated, the model would be asked for them.
_CONTEXT_NAMES = frozenset({"ctx", "context", "tool_context"})
# The longest result text a tool's call gives the model (UTF-8 bytes; the rest is cut, and the
# text says so), as an MCP tool's (activities/mcp/_results.py); and the most items read of an
# iterator a tool returns.
MAX_RESULT_BYTES = 1024 * 1024
MAX_RESULT_ITEMS = 100_000
# A tool name as providers take it (OpenAI: ^[a-zA-Z0-9_-]{1,64}$; agentrt's own use dots).
TOOL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params|Returns|Return|Raises|Yields|Examples?|Notes?)\s*:\s*$")
_ARG_LINE = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def docstring_parts(doc: str | None) -> tuple[str, dict[str, str]]:
    """``(description, {argument: description})`` from a Google-style docstring (an ``Args:``
    section of ``name: text`` or ``name (type): text`` lines, continued by deeper-indented
    lines) or reST ``:param name: text`` lines. The description is the text before the first
    section, paragraphs kept."""
    lines = inspect.cleandoc(doc or "").splitlines()
    description: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    indent = 0
    for line in lines:
        sphinx = _SPHINX_PARAM.match(line)
        if sphinx:
            name, section = sphinx.group(1), "args"
            args[name], current = sphinx.group(2).strip(), name
            indent = len(line) - len(line.lstrip())
            continue
        if line.lstrip().startswith(":"):
            section, current = "other", None  # :returns:, :raises: ...
            continue
        heading = _SECTION.match(line)
        if heading:
            section = "args" if heading.group(1) in ("Args", "Arguments", "Parameters", "Params") else "other"
            current = None
            continue
        if section is None:
            description.append(line)
            continue
        if section != "args" or not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        entry = _ARG_LINE.match(line)
        if entry and (current is None or depth <= indent):
            name, indent = entry.group(1), depth
            args[name], current = entry.group(2).strip(), name
        elif current is not None:
            args[current] = f"{args[current]} {line.strip()}".strip()
    text = "\n".join(description).strip()
    return re.sub(r"\n{3,}", "\n\n", text), args


def _is_context(annotation: Any) -> bool:
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation is ToolContext or (isinstance(annotation, type) and issubclass(annotation, ToolContext))


def _field_for(annotation: Any, default: Any, doc: str | None, alias: str) -> tuple[Any, Any]:
    """The ``(type, FieldInfo)`` of one parameter: a plain string in ``Annotated`` metadata is its
    description (as pydantic-ai and the OpenAI Agents SDK read it), else the docstring's."""
    description = doc
    if get_origin(annotation) is Annotated:
        base, *metadata = get_args(annotation)
        texts = [m for m in metadata if isinstance(m, str)]
        if any(isinstance(m, FieldInfo) and m.description for m in metadata):
            description = None  # Field(description=...) in Annotated says it already
        if texts:
            description = texts[0]
            rest = [m for m in metadata if not isinstance(m, str)]
            annotation = Annotated[tuple([base, *rest])] if rest else base  # type: ignore[valid-type]
    kwargs: dict[str, Any] = {"alias": alias}
    if description:
        kwargs["description"] = description
    if default is not inspect.Parameter.empty:
        kwargs["default"] = default
    return annotation, Field(**kwargs)


class FunctionTool(Tool):
    """A ``Tool`` made from a function by ``@tool``; calling it calls the function.

    ``Args`` is a pydantic model of the function's parameters (extra names forbidden; a parameter
    annotated ``ToolContext``, first, gets the call's context instead). The function may be
    synchronous (run on a thread of its own that the activity's thread waits for,
    ``ToolRuntime.call``) or ``async`` (run on the worker's tool event loop, ``ToolRuntime``),
    each bounded by the call's time. It returns ``str`` (as it is), a ``ToolOutput``, a pydantic model or JSON-able
    data (as JSON). It raises ``ToolError`` (or a subclass) for a failure the model should see;
    any other exception is retried by the activity's retry policy and, at the last attempt,
    becomes a ``ToolCrashedError`` the model sees (``crash_retried``).
    """

    crash_retried: ClassVar[bool] = True

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        risk: Risk = "effectful",
        timeout_seconds: float | None = None,
        local_activity: bool = False,
        secrets: Sequence[str] = (),
    ) -> None:
        if not callable(function):
            raise ConfigurationError(f"@tool needs a function, not {function!r}")
        self.function = function
        self.name = name or getattr(function, "__name__", "")  # type: ignore[misc]
        if not isinstance(self.name, str) or not TOOL_NAME.fullmatch(self.name):  # match() lets "x\n" through
            raise ConfigurationError(f"tool name {self.name!r} must match {TOOL_NAME.pattern} (what model providers accept)")
        if risk not in ("read_only", "idempotent", "effectful"):
            raise ConfigurationError(f"tool {self.name!r}: risk must be read_only, idempotent or effectful, not {risk!r}")
        if timeout_seconds is not None and not (0 < timeout_seconds < float("inf")):
            raise ConfigurationError(f"tool {self.name!r}: timeout_seconds must be a positive number of seconds")
        if local_activity and risk != "read_only":
            raise ConfigurationError(f"tool {self.name!r}: only a read_only tool may run as a local activity")
        if isinstance(secrets, str) or not all(isinstance(n, str) and SECRET_NAME.fullmatch(n) for n in secrets):
            raise ConfigurationError(
                f"tool {self.name!r}: secrets must be a list of names (letters, digits and _, as environment "
                f"variables are spelled), not {secrets!r}"
            )
        self.secrets = tuple(dict.fromkeys(secrets))
        self.risk = risk  # type: ignore[misc]
        self.timeout_seconds = timeout_seconds
        self.local_activity = local_activity  # type: ignore[misc]
        self.is_async = inspect.iscoroutinefunction(function)
        summary, arg_docs = docstring_parts(inspect.getdoc(function))
        self.description = description or summary or self.name  # type: ignore[misc]
        self.takes_context = False
        self._params: list[tuple[str, str]] = []  # (parameter name, Args field name)
        self.Args = self._args_model(arg_docs)  # type: ignore[misc]
        self.__doc__ = function.__doc__
        self.__wrapped__ = function

    def _args_model(self, arg_docs: dict[str, str]) -> type[BaseModel]:
        try:
            hints = get_type_hints(self.function, include_extras=True)
        except Exception as err:  # noqa: BLE001 - a forward reference that does not resolve
            raise ConfigurationError(f"tool {self.name!r}: cannot read its type hints: {err}") from err
        fields: dict[str, Any] = {}
        for index, param in enumerate(inspect.signature(self.function).parameters.values()):
            annotation = hints.get(param.name, Any)
            if index == 0 and param.name in ("ctx", "context") and param.name not in hints:
                raise ConfigurationError(
                    f"tool {self.name!r}: parameter {param.name!r} has no annotation; write `{param.name}: ToolContext` "
                    "for the call's context (unannotated, the model would be asked for it as an argument)"
                )
            if _is_context(annotation):
                if index != 0:
                    raise ConfigurationError(f"tool {self.name!r}: the ToolContext parameter must come first")
                self.takes_context = True
                continue
            if param.name in _CONTEXT_NAMES and param.name not in hints:
                raise ConfigurationError(
                    f"tool {self.name!r}: parameter {param.name!r} has no annotation; write `{param.name}: ToolContext` "
                    "for the call's context (unannotated, it is an argument the model fills in)"
                )
            if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                raise ConfigurationError(f"tool {self.name!r}: *args and **kwargs have no JSON Schema; name each argument")
            if param.kind is inspect.Parameter.POSITIONAL_ONLY:
                raise ConfigurationError(f"tool {self.name!r}: positional-only parameter {param.name!r}; tools are called by name")
            # Fields get neutral names (a parameter may be called ``model_config`` or ``schema``);
            # the alias is the name the model sees and sends.
            field_name = f"a{index}"
            annotation, info = _field_for(annotation, param.default, arg_docs.get(param.name), param.name)
            fields[field_name] = (annotation, info)
            self._params.append((param.name, field_name))
        model_name = re.sub(r"\W", "_", self.name) + "_args"
        try:
            model = create_model(  # type: ignore[call-overload]
                model_name, __config__=ConfigDict(extra="forbid", populate_by_name=False), **fields
            )
            model.model_json_schema(by_alias=True)
        except (PydanticSchemaGenerationError, TypeError, ValueError) as err:
            raise ConfigurationError(f"tool {self.name!r}: {self._undescribable(fields, err)}") from err
        return model

    def _undescribable(self, fields: dict[str, Any], err: Exception) -> str:
        """What to tell about arguments with no JSON Schema: the first parameter that has none, by
        its own name and type, and what to do instead; else pydantic's message."""
        for name, field_name in self._params:
            try:
                create_model("one_arg", **{field_name: fields[field_name]}).model_json_schema()  # type: ignore[call-overload]
            except (PydanticSchemaGenerationError, TypeError, ValueError):
                annotation = fields[field_name][0]
                shown = getattr(annotation, "__name__", None) or repr(annotation)
                return (
                    f"parameter {name!r} ({shown}) has no JSON Schema: the model sends JSON, so type it with a pydantic "
                    "model, a dataclass, a TypedDict or JSON types; a client, connection or pool comes from the "
                    "worker's deps (ctx.deps) instead"
                )
        return f"its arguments have no JSON Schema: {err}"

    def spec(self):  # type: ignore[no-untyped-def]
        """``Tool.spec`` with ``timeout_seconds``, the parameters by their own names."""
        spec = super().spec()
        return spec.model_copy(update={"timeout_seconds": self.timeout_seconds})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tool {self.name} ({self.risk})>"

    def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        kwargs = {param: getattr(args, field) for param, field in self._params}
        positional = (ctx,) if self.takes_context else ()
        if self.is_async:
            result = ctx.run_async(self.function(*positional, **kwargs))
        else:
            result = ctx.run_sync(self.function, positional, kwargs)
        if inspect.iscoroutine(result):
            result = ctx.run_async(result)  # a sync function that returned a coroutine
        return result if isinstance(result, ToolOutput) else ToolOutput(result_text(self.name, result))


def result_text(name: str, result: Any) -> str:
    """What the model reads of a tool's return value: a ``str`` as it is, anything else as JSON
    (pydantic models, dataclasses, dicts, lists, numbers, None; an iterator or generator as the
    list of its first ``MAX_RESULT_ITEMS`` items, which never reads on past them), cut at
    ``MAX_RESULT_BYTES`` (UTF-8) with a last line saying how much was left out, as an MCP tool's
    result is. Raises ``ToolError`` for a value with no JSON form."""
    if isinstance(result, Iterator):  # a generator that never ends must not hold the call's thread
        items = list(islice(result, MAX_RESULT_ITEMS + 1))
        if len(items) > MAX_RESULT_ITEMS:
            raise ToolError(f"{name} returned an iterator of more than {MAX_RESULT_ITEMS:,} items; return a list")
        result = items
    if not isinstance(result, str):
        try:
            result = to_json(result).decode()
        except PydanticSerializationError as err:
            raise ToolError(f"{name} returned a {type(result).__name__}, which has no JSON form: {err}") from err
    if len(result) <= MAX_RESULT_BYTES // 4:
        return result
    result = redact_secrets(result)  # before the cut: a secret's value crossing it is replaced whole
    data = result.encode(errors="surrogatepass")
    if len(data) <= MAX_RESULT_BYTES:
        return result
    kept = data[:MAX_RESULT_BYTES].decode(errors="ignore")
    return f"{kept}\n[cut: {len(data) - len(kept.encode(errors='surrogatepass')):,} more bytes of {name}'s result not shown]"


@overload
def tool(function: Callable[..., Any], /) -> FunctionTool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    risk: Risk = "effectful",
    timeout_seconds: float | None = None,
    local_activity: bool = False,
    secrets: Sequence[str] = (),
) -> Callable[[Callable[..., Any]], FunctionTool]: ...
def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    risk: Risk = "effectful",
    timeout_seconds: float | None = None,
    local_activity: bool = False,
    secrets: Sequence[str] = (),
) -> Any:
    """Make a tool of a function, as ``@tool`` or ``@tool(risk=..., ...)``.

    - ``name``: what the model calls it (default the function's name; ``^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$``).
    - ``description``: what the model reads (default the docstring's text before its sections).
    - ``risk``: ``read_only`` (no effect: run freely), ``idempotent`` (repeatable) or ``effectful``
      (the default: run at most once per idempotency key through the effect ledger). The session's
      ``ApprovalPolicy`` decides by it.
    - ``timeout_seconds``: bound on one call, within the session's ``tool_timeout_seconds``.
    - ``local_activity``: a ``read_only`` tool that returns in well under a second may run as a
      Temporal local activity.
    - ``secrets``: names of the secrets the tool needs (``["ORDERS_API_KEY"]``); the worker reads
      them from its ``[secrets]`` sources at each call and the tool finds them in
      ``ctx.secrets["ORDERS_API_KEY"]``. The model never sees them: not in the tool's spec, and any
      value in the tool's output or error is recorded as ``[secret:NAME]``. A name no source has
      fails the call with ``SecretNotFound`` (and the worker's start with ``SecretsMissing``).

    The JSON Schema comes from the signature: pydantic types, defaults, ``Annotated[T, "text"]``
    or ``Field(description=...)``, and the docstring's ``Args:`` section. Raises
    ``ConfigurationError`` for a function whose parameters have no JSON Schema.
    """
    options = dict(
        name=name, description=description, risk=risk, timeout_seconds=timeout_seconds, local_activity=local_activity,
        secrets=secrets,
    )
    if function is not None:
        return FunctionTool(function, **options)  # type: ignore[arg-type]
    return lambda f: FunctionTool(f, **options)  # type: ignore[arg-type]


