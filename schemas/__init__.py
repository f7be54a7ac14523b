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

import types as _types

# The star imports above give pyright the names, and each bound its module here (``_activities``
# ...): the package's list is theirs, kept in one place. A module imported only on the way has no
# star import here, so its names are not attributes of the package: tests/test_exported_members.py
# would catch one that crept in.
__all__ = sorted(  # pyright: ignore[reportUnsupportedDunderAll]
    {
        name
        for module in list(globals().values())
        if isinstance(module, _types.ModuleType) and module.__name__.startswith(__name__ + "._")
        for name in getattr(module, "__all__", ())
    }
)
