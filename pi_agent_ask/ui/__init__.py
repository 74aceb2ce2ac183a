"""prompt_toolkit surfaces: the form, the settings overlay, and the ``ask``/``settings`` commands.

prompt_toolkit runs on asyncio; here it runs inside the Trio run through trio-asyncio, which
replaces ``asyncio.get_running_loop`` so that asyncio code finds the loop trio-asyncio runs.
Modules that did ``from asyncio import get_running_loop`` before that replacement keep the
original, which cannot see that loop; prompt_toolkit does this in several modules. Importing
trio-asyncio here, before any module of this package imports prompt_toolkit, covers the usual
order; :func:`rebind_event_loop_lookup` covers programs that imported prompt_toolkit first.
"""

from __future__ import annotations

import asyncio
import sys

import trio_asyncio  # noqa: F401  (imported for its asyncio patches; see the docstring)

__all__ = ["rebind_event_loop_lookup"]


def rebind_event_loop_lookup() -> None:
    """Point prompt_toolkit's imported ``get_running_loop`` names at trio-asyncio's version.

    Idempotent; a no-op when prompt_toolkit was imported after trio-asyncio.
    """
    patched = asyncio.get_running_loop
    for name, module in list(sys.modules.items()):
        if not name.startswith("prompt_toolkit") or module is None:
            continue
        current = getattr(module, "get_running_loop", None)
        if current is not None and current is not patched:
            module.get_running_loop = patched  # type: ignore[attr-defined]
