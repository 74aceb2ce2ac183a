"""Plain code, checked: the package reads only the public names of its dependencies and stays in
modules a person can hold in mind.

Each check below scans the source of ``pi_agent_ask`` (its syntax tree, not its text, so a word in
a comment or a docstring does not count) and fails on:

- a private name of a dependency: ``import trio._core``, ``from prompt_toolkit.layout.screen
  import _CHAR_CACHE``, ``Window._highlight_digraph`` where ``Window`` came from prompt_toolkit;
- ``linecache`` (source re-compiled from another library's generated code);
- an assignment to ``__class__`` (an instance turned into another class after it was built);
- ``object.__new__`` (an instance built without its ``__init__``, state copied by hand);
- the hand-made scheduling of ``trio.lowlevel`` (``wait_task_rescheduled``, ``reschedule``,
  ``current_task``) or ``tasks_waiting_receive`` in ``actors/``: actors talk through memory
  channels and run their own transitions;
- ``trio.lowlevel`` in ``actors/``, or elsewhere without a comment on its line or the line
  above saying why no public API does (``# ...``);
- a module over 800 lines;
- an attrs class with no fields (a record that carries only its kind is a ``Fieldless``
  subclass, ``form/fieldless.py``: one way to make one);
- ``desk/`` and ``mcp_server/`` importing each other (what both need lives below them).

Every check holds for every module, with no list of exceptions: the last ones were fixed.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pi_agent_ask"

MAX_LINES = 800

# Top-level modules of the dependencies, named even when one is not installed here (the test
# reads source, it imports nothing); every other installed distribution's modules count too.
DEPENDENCIES = frozenset(
    {
        "anyio",
        "attr",
        "attrs",
        "cbor2",
        "httpx",
        "httpx2",
        "hypercorn",
        "jinja2",
        "jsonschema",
        "mcp",
        "mcp_types",
        "outcome",
        "prompt_toolkit",
        "psycopg",
        "psycopg_pool",
        "pyte",
        "selenium",
        "sniffio",
        "sse_starlette",
        "starlette",
        "trio",
        "trio_asyncio",
        "uvicorn",
        "wcwidth",
    }
    | {
        name
        for name, dists in importlib.metadata.packages_distributions().items()
        if "pi-agent-ask" not in dists and not name.startswith("_")
    }
)

ACTOR_SCHEDULING = frozenset(
    {"wait_task_rescheduled", "reschedule", "current_task", "tasks_waiting_receive"}
)

Offence = tuple[int, str]
"""A line and what is wrong on it."""

# -- reading the source --------------------------------------------------------------------


@functools.cache
def _parse(source: str) -> ast.Module:
    return ast.parse(source)


def _sources() -> dict[str, str]:
    return {
        path.relative_to(PACKAGE).as_posix(): path.read_text()
        for path in sorted(PACKAGE.rglob("*.py"))
    }


SOURCES = _sources()


@functools.cache
def _names_defined(source: str) -> frozenset[str]:
    """Every name a source defines or spells: functions, classes, assigned names and
    attributes, parameters, keywords, imported names and identifier-like strings (attrs
    fields, ``getattr`` names)."""
    names: set[str] = set()
    for node in ast.walk(_parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg | ast.keyword) and node.arg:
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.isidentifier()
        ):
            names.add(node.value)
    return frozenset(names)


@functools.cache
def _package_names() -> frozenset[str]:
    """Every name the package defines or spells. Read when a check first needs it, not when
    the module is imported: every test worker imports it, and parsing the whole package took
    2 to 3 s of CPU of each worker's collection, whether it ran these checks or not."""
    return frozenset().union(*(_names_defined(source) for source in SOURCES.values()))


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _dependency(module: str) -> bool:
    return module.split(".")[0] in DEPENDENCIES


def _chain(node: ast.expr) -> tuple[str, list[str]] | None:
    """``a.b.c`` as ``("a", ["b", "c"])``; None when the chain does not start at a name."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return node.id, attrs[::-1]
    return None


# -- the checks: each takes (relative path, source) and yields offences ---------------------


def private_names(path: str, source: str) -> Iterator[Offence]:
    """Private names reached through a dependency: imported, or an attribute of a name that
    came from one (``trio.lowlevel._x``, ``Window._y`` after ``from prompt_toolkit... import
    Window``)."""
    tree = _parse(source)
    origin: dict[str, str] = {}  # local name -> the dependency's dotted name it stands for
    stdlib: set[str] = set()  # local names of standard library modules
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in sys.stdlib_module_names:
                    stdlib.add(alias.asname or alias.name.split(".")[0])
                if not _dependency(alias.name):
                    continue
                private = [part for part in alias.name.split(".") if _is_private(part)]
                if private:
                    yield node.lineno, f"import {alias.name}"
                if alias.asname:
                    origin[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    origin[top] = top
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if not _dependency(node.module):
                continue
            if any(_is_private(part) for part in node.module.split(".")):
                yield node.lineno, f"from {node.module} import ..."
            for alias in node.names:
                if _is_private(alias.name):
                    yield node.lineno, f"from {node.module} import {alias.name}"
                origin[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            chain = _chain(node)
            if chain is not None and chain[0] in origin:
                yield node.lineno, ".".join([origin[chain[0]], *chain[1]])
    yield from _inherited_privates(tree, origin)
    # A private attribute the package defines nowhere belongs to someone else: a dependency's
    # object reached through a value (``app.renderer._last_screen``). The standard library's
    # names (``os._Environ``) are not a dependency's.
    own = _package_names() | _names_defined(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr) and node.attr not in own:
            chain = _chain(node)
            if chain is not None and chain[0] in stdlib and chain[0] not in origin:
                continue
            yield node.lineno, f"{node.attr} (defined nowhere in the package)"


def _inherited_privates(tree: ast.Module, origin: dict[str, str]) -> Iterator[Offence]:
    """``self._name`` in a class that subclasses a dependency's class, where the class does
    not define ``_name`` itself: the dependency's private attribute."""
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        bases = [_chain(base) for base in cls.bases]
        foreign = [b for b in bases if b is not None and b[0] in origin]
        if not foreign:
            continue
        own = _defined_names(cls)
        for node in ast.walk(cls):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and _is_private(node.attr)
                and node.attr not in own
            ):
                base = foreign[0]
                dotted = ".".join([origin[base[0]], *base[1]])
                yield node.lineno, f"{dotted}.{node.attr} (through self)"


def _defined_names(cls: ast.ClassDef) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def linecache_use(path: str, source: str) -> Iterator[Offence]:
    for node in ast.walk(_parse(source)):
        if isinstance(node, ast.Import) and any(
            a.name.split(".")[0] == "linecache" for a in node.names
        ):
            yield node.lineno, "import linecache"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == (
            "linecache"
        ):
            yield node.lineno, "from linecache import ..."


def class_assignment(path: str, source: str) -> Iterator[Offence]:
    for node in ast.walk(_parse(source)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Attribute) and part.attr == "__class__":
                    yield node.lineno, "assignment to __class__"
        if (
            isinstance(node, ast.Call)
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value == "__class__"
            and _chain(node.func) in (("setattr", []), ("object", ["__setattr__"]))
        ):
            yield node.lineno, "__class__ set through setattr"


def object_new(path: str, source: str) -> Iterator[Offence]:
    for node in ast.walk(_parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "__new__"
            and isinstance(node.value, ast.Name)
            and node.value.id == "object"
        ):
            yield node.lineno, "object.__new__"


def actor_scheduling(path: str, source: str) -> Iterator[Offence]:
    if not path.startswith("actors/"):
        return
    for node in ast.walk(_parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in ACTOR_SCHEDULING:
            yield node.lineno, node.attr
        elif isinstance(node, ast.Name) and node.id in ACTOR_SCHEDULING:
            yield node.lineno, node.id
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name in ACTOR_SCHEDULING:
                    yield node.lineno, f"import of {alias.name}"


def _uses_lowlevel(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.module == "trio.lowlevel"
    if isinstance(node, ast.Import):
        return any(alias.name == "trio.lowlevel" for alias in node.names)
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "lowlevel"
        and isinstance(node.value, ast.Name)
        and node.value.id == "trio"
    )


def lowlevel_reason(path: str, source: str) -> Iterator[Offence]:
    """``trio.lowlevel``: none in ``actors/`` (they talk through memory channels); elsewhere
    only what no public API offers, each use with its reason in a comment beside or above."""
    lines = source.splitlines()
    for node in ast.walk(_parse(source)):
        if not _uses_lowlevel(node):
            continue
        used = getattr(node, "lineno", 0)
        if path.startswith("actors/"):
            yield used, "trio.lowlevel in an actor"
        elif not any("#" in line for line in lines[max(used - 2, 0) : used]):
            yield used, "trio.lowlevel without a comment saying why"


def module_size(path: str, source: str) -> Iterator[Offence]:
    lines = len(source.splitlines())
    if lines > MAX_LINES:
        yield lines, f"{lines} lines (at most {MAX_LINES})"


def fieldless_attrs(path: str, source: str) -> Iterator[Offence]:
    for node in ast.walk(_parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        by_attrs = any("attr" in ast.unparse(d) for d in node.decorator_list)
        body = [
            statement
            for statement in node.body
            if not isinstance(statement, ast.Pass)
            and not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))
        ]
        if by_attrs and not body:
            yield node.lineno, f"attrs class {node.name} with no fields (a Fieldless subclass)"


def _package_imports(path: str, source: str) -> Iterator[tuple[int, str]]:
    """Every ``pi_agent_ask`` module a file imports (absolute or relative), with the line."""
    module = ["pi_agent_ask", *Path(path).with_suffix("").parts]
    if module[-1] == "__init__":
        module.pop()
        package = module
    else:
        package = module[:-1]
    for node in ast.walk(_parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                source_module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source_module = node.module or ""
            for alias in node.names:
                yield node.lineno, f"{source_module}.{alias.name}"


def _cross_imports(sources: dict[str, str]) -> dict[tuple[str, str], list[str]]:
    """Imports from ``desk/`` into ``mcp_server/`` and back, by direction."""
    found: dict[tuple[str, str], list[str]] = {
        ("desk", "mcp_server"): [],
        ("mcp_server", "desk"): [],
    }
    for path, source in sources.items():
        top = path.split("/")[0]
        if top not in ("desk", "mcp_server"):
            continue
        other = "mcp_server" if top == "desk" else "desk"
        for line, name in _package_imports(path, source):
            if name.startswith(f"pi_agent_ask.{other}"):
                found[top, other].append(f"{path}:{line}: imports {name}")
    return found


def desk_mcp_direction(sources: dict[str, str]) -> list[str]:
    """Offences when imports run both ways between ``desk/`` and ``mcp_server/``."""
    found = _cross_imports(sources)
    if all(found.values()):
        return [line for lines in found.values() for line in lines]
    return []


FileCheck = Callable[[str, str], Iterator[Offence]]

CHECKS: dict[str, FileCheck] = {
    "private-names": private_names,
    "linecache": linecache_use,
    "class-assignment": class_assignment,
    "object-new": object_new,
    "actor-scheduling": actor_scheduling,
    "lowlevel-reason": lowlevel_reason,
    "module-size": module_size,
    "fieldless-attrs": fieldless_attrs,
}


def offences(check: str, sources: dict[str, str]) -> list[str]:
    if check == "desk-mcp-direction":
        return desk_mcp_direction(sources)
    return [
        offence
        for path, source in sources.items()
        for offence in _file_offences(check, path, source)
    ]


@functools.cache
def _file_offences(check: str, path: str, source: str) -> tuple[str, ...]:
    return tuple(f"{path}:{line}: {what}" for line, what in CHECKS[check](path, source))


ALL_CHECKS = [*CHECKS, "desk-mcp-direction"]


# -- the tests -----------------------------------------------------------------------------


@pytest.mark.parametrize("check", ALL_CHECKS)
def test_the_package_passes(check: str) -> None:
    found = offences(check, SOURCES)
    assert found == [], f"{check}:\n" + "\n".join(found)


# The checks themselves, on small sources: each finds what it is for and nothing else.

OFFENDING = {
    "private-names": [
        "import trio._core\n",
        "from trio._core import run\n",
        "from prompt_toolkit.layout.screen import _CHAR_CACHE\n",
        "import trio\ntrio.lowlevel._x()\n",
        "import attrs as a\na._make.thing\n",
        "from prompt_toolkit.layout import Window\nWindow._highlight_digraph(w, s)\n",
        "from prompt_toolkit.layout import Window\n"
        "class W(Window):\n    def f(self):\n        self._show_key_processor_key_buffer(1)\n",
        "import cbor2\ncbor2._encoder\n",
        "import psycopg\npsycopg._connection\n",
        "app.renderer._last_screen_of_a_dependency\n",
    ],
    "linecache": ["import linecache\n", "from linecache import cache\n"],
    "class-assignment": [
        "x.__class__ = int\n",
        "a.b.__class__ = C\n",
        "setattr(x, '__class__', C)\n",
        "object.__setattr__(x, '__class__', C)\n",
    ],
    "object-new": ["x = object.__new__(C)\n", "new = object.__new__\n"],
    "actor-scheduling": [
        "import trio\nawait trio.lowlevel.wait_task_rescheduled(abort)\n",
        "import trio\ntrio.lowlevel.reschedule(task)\n",
        "from trio.lowlevel import current_task\n",
        "tx.statistics().tasks_waiting_receive\n",
    ],
    "lowlevel-reason": [
        "import trio\nawait trio.lowlevel.checkpoint()  # a reason, but in an actor\n",
        "from trio.lowlevel import checkpoint\n",
        "import trio.lowlevel\n",
    ],
    "module-size": ["x = 1\n" * (MAX_LINES + 1)],
    "fieldless-attrs": [
        '@attrs.frozen(repr=False)\nclass Bell:\n    """A bell."""\n',
        "@attr.s\nclass Quit:\n    pass\n",
    ],
}

PLAIN = {
    "private-names": [
        "import trio\ntrio.lowlevel.checkpoint()\n",
        "from prompt_toolkit.layout import Window\n"
        "class W(Window):\n    def __init__(self):\n        self._mine = 1\n"
        "    def f(self):\n        return self._mine\n",
        "from pi_agent_ask.form import _helpers\n",
        "import attrs\nattrs.__version__\n",
        "class A:\n    _mine = 1\nA()._mine\n",
        "import os\nos._exit(1)\n",
    ],
    "linecache": ["# linecache in a comment\n", "'linecache'\n"],
    "class-assignment": ["x = y.__class__\n", "__class__ = 1\n"],
    "object-new": ["x = C.__new__(C)\n", "'object.__new__'\n"],
    "actor-scheduling": ["import trio\ntrio.lowlevel.checkpoint()\n"],
    "lowlevel-reason": ["import trio\nawait trio.sleep(0)\n", "'trio.lowlevel'\n"],
    "module-size": ["x = 1\n" * MAX_LINES],
    "fieldless-attrs": [
        'class Bell(Fieldless):\n    """A bell."""\n',
        "@attrs.frozen\nclass Grant:\n    claim_id: int\n",
    ],
}


@pytest.mark.parametrize(
    ("check", "source"), [(check, s) for check, sources in OFFENDING.items() for s in sources]
)
def test_each_check_finds_its_offence(check: str, source: str) -> None:
    path = "actors/x.py"
    assert offences(check, {path: source}) != []


@pytest.mark.parametrize(
    ("check", "source"), [(check, s) for check, sources in PLAIN.items() for s in sources]
)
def test_each_check_passes_plain_code(check: str, source: str) -> None:
    assert offences(check, {"actors/x.py": source}) == []


def test_actor_scheduling_is_checked_in_actors_only() -> None:
    source = "import trio\ntrio.lowlevel.current_task()\n"
    assert offences("actor-scheduling", {"aio.py": source}) == []


def test_desk_and_mcp_server_import_one_way() -> None:
    one_way = {
        "desk/a.py": "from pi_agent_ask.mcp_server.tools import AgentTools\n",
        "mcp_server/b.py": "import trio\n",
    }
    assert offences("desk-mcp-direction", one_way) == []
    both = {**one_way, "mcp_server/b.py": "from ..desk import connection\n"}
    assert offences("desk-mcp-direction", both) == [
        "desk/a.py:1: imports pi_agent_ask.mcp_server.tools.AgentTools",
        "mcp_server/b.py:1: imports pi_agent_ask.desk.connection",
    ]


def test_trio_lowlevel_outside_actors_needs_its_reason() -> None:
    bare = "import trio\n\nawait trio.lowlevel.wait_readable(fd)\n"
    assert offences("lowlevel-reason", {"mcp_server/w.py": bare}) == [
        "mcp_server/w.py:3: trio.lowlevel without a comment saying why"
    ]
    above = "import trio\n# no trio stream wraps this descriptor\nawait trio.lowlevel.wait_readable(fd)\n"
    beside = "import trio\n\nawait trio.lowlevel.wait_readable(fd)  # no stream wraps fd\n"
    for source in (above, beside):
        assert offences("lowlevel-reason", {"mcp_server/w.py": source}) == []
