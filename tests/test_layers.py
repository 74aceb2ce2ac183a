"""The import graph of ``pi_agent_ask``: layers only point down, and nothing imports in a cycle.

The rule (``docs/architecture.md``)::

    form (and events, proc_stat)  <-  persistence  <-  actors  <-  ui (and clipboard)  <-  host / cli

A module may import its own layer and the layers below it, never one above. Every import
counts: top-level ones, those inside functions (lazy imports only defer the cost, not the
dependency) and those under ``TYPE_CHECKING``. Host-level modules (the package's
``__init__``, ``cli``, ``host``, ``aio``, ``integrations``, ``mcp_common``, ``mcp_server``,
``desk`` (with its web page), ``store``, ``commands``) may import anything below them. Among
them, the stdio MCP server and the desk never import each other: what both need is
``mcp_common``, which imports neither. No two top-level packages import each other, also
through a third: data flows one way between them too. A new top-level module or package fails
here until it is given a layer.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pi_agent_ask"

LAYERS = {
    "form": 0,
    "events": 0,
    "proc_stat": 0,
    "persistence": 1,
    "actors": 2,
    "ui": 3,
    "clipboard": 3,
    "host": 4,
    "cli": 4,
    "closed_pipe": 4,
    "history_table": 4,
    "__main__": 4,
    "aio": 4,
    "integrations": 4,
    "mcp_common": 4,
    "mcp_server": 4,
    "desk": 4,
    "commands": 4,  # the subcommands that choose between the servers below them
    "store": 4,  # the team store: PostgreSQL behind the desk
    "": 4,  # the package's own __init__ (lazy re-exports of the public names)
}
NAMES = {0: "form", 1: "persistence", 2: "actors", 3: "ui", 4: "host"}

EXCEPTIONS: dict[tuple[str, str], str] = {}
"""(importer, imported) pairs allowed against the rule, each with its reason. Empty."""


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _import_statements(name: str, path: Path) -> Iterator[tuple[str, list[str], int]]:
    """Every import of module ``name``: the module imported from (relative imports resolved),
    the names it takes (none for ``import a.b``) and the line."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            yield source, [alias.name for alias in node.names], node.lineno


def _imports(name: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every ``pi_agent_ask`` module ``name`` imports, with the line, resolved to a module of
    the package (``from pkg import name`` names a module when there is one)."""
    for source, names, line in _import_statements(name, path):
        if source.split(".")[0] != "pi_agent_ask":
            continue
        if not names:
            yield _known(source), line
        for alias in names:
            candidate = f"{source}.{alias}"
            yield (candidate if candidate in MODULES else _known(source)), line


def _known(module: str) -> str:
    while module not in MODULES and "." in module:
        module = module.rsplit(".", 1)[0]
    return module


def _layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    if top not in LAYERS:
        pytest.fail(f"{module}: a new top-level module; give it a layer in tests/test_layers.py")
    return LAYERS[top]


GRAPH = {
    name: sorted({(target, line) for target, line in _imports(name, path) if target != name})
    for name, path in MODULES.items()
}


def test_every_module_has_a_layer() -> None:
    for name in MODULES:
        _layer(name)


def test_imports_only_point_down() -> None:
    upward = []
    for name, targets in GRAPH.items():
        for target, line in targets:
            if _layer(target) > _layer(name) and (name, target) not in EXCEPTIONS:
                upward.append(
                    f"{MODULES[name].relative_to(PACKAGE.parent)}:{line}: {name} "
                    f"({NAMES[_layer(name)]}) imports {target} ({NAMES[_layer(target)]})"
                )
    assert upward == [], "imports against the layers:\n" + "\n".join(upward)


def test_no_import_cycles() -> None:
    cycles = _cycles({name: {t for t, _ in targets} for name, targets in GRAPH.items()})
    assert cycles == [], "modules importing each other (in a cycle):\n" + "\n".join(
        ", ".join(c) for c in cycles
    )


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _between_packages(graph: dict[str, list[tuple[str, int]]]) -> dict[str, set[str]]:
    """The imports between top-level packages and modules (``pi_agent_ask.desk.run`` importing
    ``pi_agent_ask.store.db`` is ``desk -> store``). The package's own ``__init__`` is left
    out: it re-exports the public names lazily, and nothing imports it."""

    def top(module: str) -> str:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else ""

    found: dict[str, set[str]] = {}
    for name, targets in graph.items():
        for target, _line in targets:
            if top(name) and top(target) and top(name) != top(target):
                found.setdefault(top(name), set()).add(top(target))
    return found


def test_no_two_packages_import_each_other() -> None:
    cycles = _cycles(_between_packages(GRAPH))
    assert cycles == [], "top-level packages importing each other:\n" + "\n".join(
        ", ".join(c) for c in cycles
    )


def test_the_package_check_sees_a_cycle_through_a_third() -> None:
    graph = {
        "pi_agent_ask.desk.run": [("pi_agent_ask.web.app", 1)],
        "pi_agent_ask.web.view": [("pi_agent_ask.store.board", 2)],
        "pi_agent_ask.store.run": [("pi_agent_ask.desk.board", 3)],
        "pi_agent_ask.store.db": [("pi_agent_ask.store.schema", 4)],
    }
    assert _cycles(_between_packages(graph)) == [["desk", "store", "web"]]


def test_the_checks_see_upward_imports_and_cycles() -> None:
    # The checks themselves: a synthetic upward edge and cycle are reported.
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _layer("pi_agent_ask.ui.surface") > _layer("pi_agent_ask.actors.runtime")
    # Lazy imports count: the dispatch imports the history tools inside ``call_tool``.
    assert any(
        t == "pi_agent_ask.persistence.history" for t, _ in GRAPH["pi_agent_ask.actors.dispatch"]
    )
    assert any(
        t == "pi_agent_ask.actors.queue_state" for t, _ in GRAPH["pi_agent_ask.actors.queue"]
    )


def test_the_runtime_facade_is_imported_from_above_only() -> None:
    # The runtime's parts build on ``actors/core.py``; below the host only the UI's assembly
    # imports the facade ``actors/runtime.py`` (a part importing it would close a cycle).
    facade = "pi_agent_ask.actors.runtime"
    importers = sorted(
        name
        for name, targets in GRAPH.items()
        if any(target == facade for target, _ in targets)
        and _layer(name) < LAYERS["host"]
        and name != "pi_agent_ask.ui.runtime"
    )
    assert importers == []
    assert any(t == "pi_agent_ask.actors.core" for t, _ in GRAPH["pi_agent_ask.actors.ask"])


SIBLINGS = {
    "pi_agent_ask.mcp_server": {"pi_agent_ask.desk"},
    "pi_agent_ask.desk": {"pi_agent_ask.mcp_server"},
    "pi_agent_ask.mcp_common": {"pi_agent_ask.desk", "pi_agent_ask.mcp_server"},
}
"""Host-level packages and the packages each must never import."""


def _crossings(graph: dict[str, list[tuple[str, int]]]) -> list[str]:
    found = []
    for name, targets in graph.items():
        for package, forbidden in SIBLINGS.items():
            if name != package and not name.startswith(package + "."):
                continue
            for target, line in targets:
                if any(target == f or target.startswith(f + ".") for f in forbidden):
                    found.append(f"{name}:{line} imports {target}")
    return found


def test_the_desk_and_the_mcp_server_import_in_one_direction() -> None:
    # The checker sees a crossing, in either direction and from the shared package.
    assert _crossings({"pi_agent_ask.desk.agents": [("pi_agent_ask.mcp_server.tools", 3)]})
    assert _crossings({"pi_agent_ask.mcp_server": [("pi_agent_ask.desk.connection", 9)]})
    assert _crossings({"pi_agent_ask.mcp_common.tools": [("pi_agent_ask.desk", 1)]})
    assert _crossings(GRAPH) == []


ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def _mapped_paths(text: str) -> set[str]:
    """The ``.py`` paths with a folder that the module map names in backticks."""
    return set(re.findall(r"`([\w/]+/[\w]+\.py)`", text))


def test_the_module_map_names_every_module_and_no_module_that_is_gone() -> None:
    # docs/architecture.md maps every module in a line, so a behaviour leads to its module in
    # one hop. A package's __init__ is its package's entry, named with the package.
    mapped = _mapped_paths(ARCHITECTURE.read_text(encoding="utf-8"))
    modules = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py"
    }
    top_level = {name for name in modules if "/" not in name}
    named = ARCHITECTURE.read_text(encoding="utf-8")
    assert sorted(m for m in modules - top_level if m not in mapped) == []
    assert sorted(m for m in top_level if f"`{m}`" not in named) == []
    repo = PACKAGE.parent
    gone = sorted(
        path for path in mapped if not (PACKAGE / path).exists() and not (repo / path).exists()
    )
    assert gone == []


def test_the_module_map_check_reads_paths_in_backticks() -> None:
    text = "| `actors/queue.py`, `web/app.py` | ... `queue_state.py` and tests/x.py |"
    assert _mapped_paths(text) == {"actors/queue.py", "web/app.py"}


def _imports_psycopg(name: str) -> bool:
    return any(
        source.split(".")[0] == "psycopg"
        for source, _names, _line in _import_statements(name, MODULES[name])
    )


def test_the_team_forwarder_needs_no_postgresql_driver() -> None:
    """``pi-agent-ask mcp --desk URL`` runs on the agent's host, which talks to desks over HTTP
    and may have no PostgreSQL client at all: nothing it imports (lazily included) imports
    psycopg, which would also cost every agent's start a tenth of a second."""
    seen, todo = set(), ["pi_agent_ask.store.forward"]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(target for target, _line in GRAPH[name])
    assert sorted(name for name in seen if _imports_psycopg(name)) == []
