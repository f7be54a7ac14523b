"""Pydantic v2 types shared by workflows, activities, the worker and clients. No I/O here.

Each private module declares its public names in its ``__all__``; this package takes them all
and its own ``__all__`` is theirs, sorted (``tests/test_exported_members.py`` checks it).
"""

from agentrt.schemas._activities import *
from agentrt.schemas._agents import *
from agentrt.schemas._audit import *
from agentrt.schemas._advisor import *
from agentrt.schemas._autonomy import *
from agentrt.schemas._base import *
from agentrt.schemas._budget import *
from agentrt.schemas._config import *
from agentrt.schemas._context import *
from agentrt.schemas._contract import *
from agentrt.schemas._errors import *
from agentrt.schemas._events import *
from agentrt.schemas._events_graph import *
from agentrt.schemas._events_memory import *
from agentrt.schemas._events_session import *
from agentrt.schemas._events_task import *
from agentrt.schemas._events_tools import *
from agentrt.schemas._graph import *
from agentrt.schemas._graph_control import *
from agentrt.schemas._graph_state import *
from agentrt.schemas._health import *
from agentrt.schemas._lanes import *
from agentrt.schemas._mcp import *
from agentrt.schemas._memory import *
from agentrt.schemas._messages import *
from agentrt.schemas._names import *
from agentrt.schemas._output import *
from agentrt.schemas._pause import *
from agentrt.schemas._quotas import *
from agentrt.schemas._run_errors import *
from agentrt.schemas._secrets import *
from agentrt.schemas._session import *
from agentrt.schemas._skills import *
from agentrt.schemas._task_state import *
from agentrt.schemas._template import *
from agentrt.schemas._text import *
from agentrt.schemas._trajectory import *
from agentrt.schemas._turns import *
from agentrt.schemas._validation import *

from agentrt.schemas import (  # the modules, for their __all__
    _activities,
    _agents,
    _audit,
    _advisor,
    _autonomy,
    _base,
    _budget,
    _config,
    _context,
    _contract,
    _errors,
    _events,
    _events_graph,
    _events_memory,
    _events_session,
    _events_task,
    _events_tools,
    _graph,
    _graph_control,
    _graph_state,
    _health,
    _lanes,
    _mcp,
    _memory,
    _messages,
    _names,
    _output,
    _pause,
    _quotas,
    _run_errors,
    _secrets,
    _session,
    _skills,
    _task_state,
    _template,
    _text,
    _trajectory,
    _turns,
    _validation,
)

# Star imports above give pyright the names; the list is computed so that it is kept in one place.
__all__ = sorted(  # pyright: ignore[reportUnsupportedDunderAll]
    {
        name
        for module in (
            _activities,
            _agents,
            _audit,
            _advisor,
            _autonomy,
            _base,
            _budget,
            _config,
            _context,
            _contract,
            _errors,
            _events,
            _events_graph,
            _events_memory,
            _events_session,
            _events_task,
            _events_tools,
            _graph,
            _graph_control,
            _graph_state,
            _health,
            _lanes,
            _mcp,
            _memory,
            _messages,
            _names,
            _output,
            _pause,
            _quotas,
            _run_errors,
            _secrets,
            _session,
            _skills,
            _task_state,
            _template,
            _text,
            _trajectory,
            _turns,
            _validation,
        )
        for name in module.__all__
    }
)
