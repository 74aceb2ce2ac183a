"""attrs for this package's classes, without compiling at import what a class may never use.

The package's modules import this as ``attrs`` (``from pi_agent_ask import _attrs as attrs``)
and write ``@attrs.frozen`` and ``@attrs.define`` as usual. The classes are attrs classes in
every way (slots, frozen, ``__init__``, validators, converters, ``attrs.fields``,
``attrs.evolve``, ``__match_args__``, pickling); what differs is when three of their methods
come to exist:

- ``__repr__`` is one function shared by every class (:func:`_repr`): the text attrs writes
  (``Name(field=value, ...)``, the fields attrs shows, ``...`` for a value that contains
  itself), read from the class's ``__attrs_attrs__`` when it is called.
- ``__eq__`` and ``__hash__`` are compiled for a class the first time one of its instances is
  compared or hashed, from the source attrs would write (``self.a == other.a and ...``,
  ``hash((<class constant>, self.a, ...))``), and then replace themselves on the class: from
  the second call on, a comparison runs exactly the code attrs would have given the class.

Why: attrs writes those methods as source and compiles it while the class is created, about
a third of a millisecond per class, so the 200-odd classes a form needs cost about half of
their modules' import time, most of it for methods a first frame never calls (``ask``'s
cold start, ``docs/benchmarks.md``). ``__init__`` is attrs's own, compiled at once: a
class is there to be instantiated. A frozen slotted class's ``__init__`` is, from its eighth
call on, attrs's own source compiled again with one change: where attrs writes
``_setattr('a', value)`` (``object.__setattr__`` through a method bound per call, which looks
``a`` up on the class again), it calls the slot's ``__set__(self, value)`` found once, about a
third cheaper for a class of two fields. The class keeps attrs's ``__init__`` when its source is
not in ``linecache`` or a field it sets is not a slot (a frozen base class without slots). The
one difference a program could see: a class that is not an attrs class, inherits such an
``__init__`` and hides a field's slot behind a class attribute of the same name.

A class gets plain attrs (everything compiled at once) when it needs what is not replicated
here: ``order``, ``cache_hash``, an explicit ``hash``, a field's ``eq`` or ``hash`` key
function, ``define`` with equality over an attrs base class (which may make it frozen), an
exception class, or a class body that writes its own
``__eq__``, ``__ne__`` or ``__hash__`` (its own ``__repr__`` is kept, as attrs keeps it).
``attrs.inspect`` of a class made here reports ``__repr__``, ``__eq__`` and ``__hash__`` as not
added by attrs (they are not).
"""

from __future__ import annotations

import linecache
import reprlib
from types import FunctionType, MemberDescriptorType
from typing import TYPE_CHECKING, Any

import attrs as _attrs

if TYPE_CHECKING:
    # Type checkers see attrs's own decorators (and their attrs plugin applies).
    from attrs import define as define
    from attrs import frozen as frozen

from attrs import NOTHING, Attribute, Factory, evolve, exceptions, field, fields, has, validators

__all__ = [
    "NOTHING",
    "Attribute",
    "Factory",
    "define",
    "evolve",
    "exceptions",
    "field",
    "fields",
    "frozen",
    "has",
    "validators",
]

_UNSUPPORTED = ("order", "cache_hash", "hash", "unsafe_hash", "these", "repr_ns")
_OWN_COMPARISON = ("__eq__", "__ne__", "__hash__")


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    """attrs's ``__repr__``, for any attrs class: the same text from its ``__attrs_attrs__``."""
    parts = []
    for a in self.__attrs_attrs__:
        if a.repr is False:
            continue
        value = getattr(self, a.name) if a.init else getattr(self, a.name, NOTHING)
        parts.append(f"{a.name}={repr(value) if a.repr is True else a.repr(value)}")
    return f"{self.__class__.__qualname__.rsplit('>.', 1)[-1]}({', '.join(parts)})"


def _compile(source: str, name: str, cls: type, namespace: dict[str, Any] | None = None) -> Any:
    namespace = {} if namespace is None else namespace
    exec(compile(source, f"<pi_agent_ask {name} {cls.__qualname__}>", "exec"), namespace)
    return namespace[name]


def _eq_source(names: list[str]) -> str:
    compared = " and ".join(f"self.{n} == other.{n}" for n in names) or "True"
    return (
        "def __eq__(self, other):\n"
        "    if other.__class__ is not self.__class__:\n"
        "        return NotImplemented\n"
        f"    return {compared}\n"
    )


def _hash_source(names: list[str], constant: int) -> str:
    hashed = "".join(f" self.{n}," for n in names)
    return f"def __hash__(self):\n    return hash(({constant},{hashed}))\n"


def _lazy_comparison(cls: type, *, hashable: bool) -> None:
    """Give ``cls`` an ``__eq__`` (and with ``hashable`` a ``__hash__``) that compiles attrs's
    code for the class at its first call and puts it in its own place (module docstring)."""
    compared = [a.name for a in cls.__attrs_attrs__ if a.eq]  # type: ignore[attr-defined]
    hashed = [a.name for a in cls.__attrs_attrs__ if (a.hash is None and a.eq) or a.hash is True]  # type: ignore[attr-defined]
    constant = hash(f"{cls.__module__}.{cls.__qualname__} hash")

    def __eq__(self: Any, other: Any) -> Any:
        compiled = _compile(_eq_source(compared), "__eq__", cls)
        cls.__eq__ = compiled  # type: ignore[method-assign]
        return compiled(self, other)

    def __hash__(self: Any) -> int:
        compiled = _compile(_hash_source(hashed, constant), "__hash__", cls)
        cls.__hash__ = compiled  # type: ignore[method-assign]
        result: int = compiled(self)
        return result

    cls.__eq__ = __eq__  # type: ignore[assignment,method-assign]
    cls.__hash__ = __hash__ if hashable else None  # type: ignore[assignment,method-assign]


_SETATTR_LINE = "_setattr = _cached_setattr_get(self)"
_SETATTR_CALL = "_setattr('"


def _slot(cls: type, name: str) -> Any:
    """The slot ``object.__setattr__(instance, name, ...)`` writes for an instance of ``cls``,
    or None when it would write anything else (a property, the instance's ``__dict__``)."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            found = klass.__dict__[name]
            return found if type(found) is MemberDescriptorType else None
    return None


def _direct_init(cls: type, original: Any) -> Any:
    """attrs's own ``__init__`` for ``cls``, from its own source, with each
    ``_setattr('name', value)`` (``object.__setattr__`` through a bound method made per call)
    written as the call of that field's slot, ``__set__(self, value)``; or None when that source
    is not at hand or sets something that is not a slot (module docstring)."""
    if not isinstance(original, FunctionType) or not original.__code__.co_filename.startswith(
        "<attrs generated"
    ):
        return None  # the class body's own ``__init__``
    cached = linecache.cache.get(original.__code__.co_filename)
    if cached is None or len(cached) != 4:  # not there, or a module's lazily read source
        return None
    lines = iter(cached[2])
    for line in lines:
        if line.startswith("def __init__("):
            body = [line]
            break
    else:
        return None
    for line in lines:
        if not line.startswith(" "):
            break
        if line.strip() != _SETATTR_LINE:
            body.append(line)
    if len(body) == 1:
        body.append("    pass\n")  # a class without fields: the line taken out was all
    setters: dict[str, Any] = {}
    for at, line in enumerate(body):
        indent = line[: len(line) - len(line.lstrip())]
        if not line.startswith(_SETATTR_CALL, len(indent)):
            continue
        name, quote, rest = line[len(indent) + len(_SETATTR_CALL) :].partition("', ")
        slot = _slot(cls, name)
        if slot is None or not quote:
            return None
        setters[f"_pi_set_{name}"] = slot.__set__
        body[at] = f"{indent}_pi_set_{name}(self, {rest}"
    source = "".join(body)
    if "_setattr" in source:
        return None
    namespace = original.__globals__
    namespace.update(setters)
    made: Any = _compile(source, "__init__", cls, namespace)
    made.__defaults__, made.__kwdefaults__ = original.__defaults__, original.__kwdefaults__
    for name in ("__module__", "__qualname__", "__doc__", "__annotations__"):
        setattr(made, name, getattr(original, name))
    return made


_INIT_CALLS_BEFORE_COMPILING = 8


def _lazy_init(cls: type) -> None:
    """Give ``cls`` an ``__init__`` that runs attrs's own for its first calls, then puts
    :func:`_direct_init`'s version of it in its place (or attrs's own, when there is none).

    Not at the first call: a class made a few times at start (a module's constants, the first
    frame's state) would pay a compile for nothing, and start would be slower."""
    original = cls.__dict__["__init__"]
    calls = [0]

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        calls[0] += 1
        if calls[0] < _INIT_CALLS_BEFORE_COMPILING:
            original(self, *args, **kwargs)
        else:
            made = _direct_init(cls, original) or original
            cls.__init__ = made  # type: ignore[misc]
            made(self, *args, **kwargs)

    for name in ("__module__", "__qualname__", "__doc__", "__annotations__"):
        setattr(__init__, name, getattr(original, name))
    __init__.__wrapped__ = original  # type: ignore[attr-defined]  # inspect.signature reads it
    cls.__init__ = __init__  # type: ignore[misc]


def _plain(cls: type, is_frozen: bool, options: dict[str, Any]) -> bool:
    """Whether ``cls`` needs plain attrs (see the module docstring)."""
    if any(options.get(name) not in (None, False) for name in _UNSUPPORTED):
        return True
    eq = options.get("eq", True)
    if not isinstance(eq, bool) or options.get("auto_detect") is False:
        return True
    if issubclass(cls, BaseException):
        return True
    if eq and not is_frozen and any(_attrs.has(base) for base in cls.__mro__[1:]):
        return True  # a frozen attrs base would make it frozen, and hashable: attrs decides
    if any(name in cls.__dict__ for name in _OWN_COMPARISON):
        return True
    # ``attrs.field(eq=key)`` / ``hash=`` with a key function: such a field carries ``eq_key``.
    return any(getattr(value, "eq_key", None) is not None for value in cls.__dict__.values())


def _make(decorator: Any, is_frozen: bool, maybe_cls: type | None, options: dict[str, Any]) -> Any:
    def wrap(cls: type) -> type:
        if _plain(cls, is_frozen, options):
            made: type = decorator(cls, **options)
        else:
            want_repr = options.get("repr", True) and "__repr__" not in cls.__dict__
            want_eq = options.get("eq", True)
            made = decorator(cls, **{**options, "repr": False, "eq": False})
            if want_repr:
                made.__repr__ = _repr  # type: ignore[assignment,method-assign]
            if want_eq:
                _lazy_comparison(made, hashable=is_frozen)
        if is_frozen and "__init__" in made.__dict__ and "__slots__" in made.__dict__:
            _lazy_init(made)
        return made

    return wrap if maybe_cls is None else wrap(maybe_cls)


if not TYPE_CHECKING:

    def frozen(maybe_cls=None, /, **options):
        """``attrs.frozen``, with ``__repr__``, ``__eq__``, ``__hash__`` made on first use."""
        return _make(_attrs.frozen, True, maybe_cls, options)

    def define(maybe_cls=None, /, **options):
        """``attrs.define``, with ``__repr__`` and ``__eq__`` made on first use."""
        return _make(_attrs.define, bool(options.get("frozen", False)), maybe_cls, options)
