"""``pi_agent_ask._attrs``: attrs classes whose ``__repr__``, ``__eq__`` and ``__hash__`` are not
compiled at import, yet behave exactly as attrs's.

Each class shape is made twice, once with plain attrs and once with the package's decorators,
and every observable is compared: the repr text, equality (including its short-circuit and
what it returns), hashing, pickling, ``attrs.evolve``, pattern matching. The last test starts
a fresh interpreter, imports what ``ask`` needs before its first frame, and checks that none of
the package's classes had a method compiled for it by then.
"""

from __future__ import annotations

import math
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pi_agent_ask import _attrs

ROOT = Path(__file__).resolve().parent.parent


def _shapes(api: Any) -> dict[str, type]:
    @api.frozen
    class Empty:
        pass

    @api.frozen
    class One:
        a: Any

    @api.frozen
    class Many:
        a: Any
        b: Any = "x"
        _c: Any = attrs.field(default=(), repr=False)
        d: Any = attrs.field(init=False, default=None, eq=False, repr=lambda value: "<d>")
        e: Any = attrs.field(default=0, hash=False)

    @api.define
    class Mutable:
        a: Any
        b: list[Any] = attrs.field(factory=list)

    @api.define(eq=False)
    class Live:
        a: Any

    @api.frozen(slots=False)
    class Unslotted:
        a: Any
        b: Any = 1

    return {
        "Empty": Empty,
        "One": One,
        "Many": Many,
        "Mutable": Mutable,
        "Live": Live,
        "Unslotted": Unslotted,
    }


PLAIN = _shapes(attrs)
OURS = _shapes(_attrs)
values = st.one_of(
    st.none(),
    st.integers(),
    st.text(max_size=5),
    st.floats(allow_nan=True),
    st.tuples(st.integers()),
)


@given(a=values, b=values, a2=values, b2=values)
def test_many_fields_repr_eq_hash_as_attrs(a: Any, b: Any, a2: Any, b2: Any) -> None:
    plain, ours = PLAIN["Many"], OURS["Many"]
    for args in ((a, b), (a2, b2)):
        assert repr(ours(*args)) == repr(plain(*args))
    for first, second in (((a, b), (a2, b2)), ((a, b), (a, b))):
        expected = plain(*first) == plain(*second)
        got = ours(*first) == ours(*second)
        assert got == expected and type(got) is type(expected)
        assert (ours(*first) != ours(*second)) == (plain(*first) != plain(*second))
    if ours(a, b) == ours(a2, b2):
        assert hash(ours(a, b)) == hash(ours(a2, b2))


def test_equality_does_not_take_the_same_object_as_equal() -> None:
    """attrs compares ``self.a == other.a``: a NaN field is unequal even to itself, a tuple
    comparison would call it equal."""
    nan = math.nan
    assert (PLAIN["One"](nan) == PLAIN["One"](nan)) is False
    assert (OURS["One"](nan) == OURS["One"](nan)) is False
    assert OURS["Many"](1, nan) != OURS["Many"](1, nan)


def test_equality_short_circuits_and_returns_what_attrs_returns() -> None:
    class Odd:
        def __init__(self, result: Any) -> None:
            self.result = result
            self.asked = 0

        def __eq__(self, other: object) -> Any:
            self.asked += 1
            return self.result

        __hash__ = object.__hash__

    for api in (attrs, _attrs):

        @api.frozen
        class Pair:
            a: Any
            b: Any

        first, second = Odd(""), Odd("yes")
        assert (Pair(first, second) == Pair(first, second)) == ""  # the falsy result itself
        assert second.asked == 0  # never reached
        first.result = 7
        assert (Pair(first, second) == Pair(first, second)) == "yes"


def test_a_class_and_other_types_compare_as_attrs_says() -> None:
    for name in ("Empty", "One", "Many", "Mutable", "Unslotted"):
        plain, ours = PLAIN[name], OURS[name]
        args = () if name == "Empty" else (1,)
        assert (ours(*args) == ours(*args)) is True
        assert ours(*args).__eq__(1) is NotImplemented
        assert ours(*args) != plain(*args)  # another class is never equal
        assert (ours(*args) == plain(*args)) == (plain(*args) == ours(*args)) is False


def test_hashability_is_attrs_s() -> None:
    assert hash(OURS["Many"](1, 2)) == hash(OURS["Many"](1, 2))
    assert hash(OURS["Empty"]()) == hash(OURS["Empty"]())
    assert hash(OURS["Many"](1, 2, e=5)) == hash(OURS["Many"](1, 2, e=6))  # hash=False field
    with pytest.raises(TypeError):
        hash(OURS["Mutable"](1))
    with pytest.raises(TypeError):
        hash(PLAIN["Mutable"](1))
    live = OURS["Live"](1)
    assert live != OURS["Live"](1) and live == live and hash(live) == object.__hash__(live)
    assert {OURS["Many"](1, 2): "x"}[OURS["Many"](1, 2)] == "x"


def test_the_first_comparison_puts_attrs_s_code_in_place() -> None:
    @_attrs.frozen
    class Fresh:
        a: int

    stub_eq, stub_hash = Fresh.__dict__["__eq__"], Fresh.__dict__["__hash__"]
    assert Fresh(1) == Fresh(1)
    assert hash(Fresh(1)) == hash(Fresh(1))
    assert Fresh.__dict__["__eq__"] is not stub_eq
    assert Fresh.__dict__["__hash__"] is not stub_hash
    assert Fresh.__eq__.__code__.co_filename.startswith("<pi_agent_ask __eq__")
    assert Fresh(1) == Fresh(1) and Fresh(1) != Fresh(2)


def test_repr_as_attrs_writes_it() -> None:
    for name, args in (("Empty", ()), ("One", ("a'b",)), ("Many", (1, [2])), ("Live", (3,))):
        assert repr(OURS[name](*args)) == repr(PLAIN[name](*args))
    ours, plain = OURS["Mutable"](1), PLAIN["Mutable"](1)
    ours.b.append(ours)  # contains itself
    plain.b.append(plain)
    assert repr(ours) == repr(plain) == "Mutable(a=1, b=[...])"


def test_a_class_s_own_methods_are_kept_or_it_gets_plain_attrs() -> None:
    @_attrs.frozen
    class OwnRepr:
        a: int

        def __repr__(self) -> str:
            return "own"

    @_attrs.frozen
    class OwnEq:
        a: int

        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 1

    assert repr(OwnRepr(1)) == "own" and OwnRepr(1) == OwnRepr(1)
    assert OwnEq(1) == OwnEq(2) and hash(OwnEq(5)) == 1

    @_attrs.frozen
    class Failure(Exception):
        code: int

    assert Failure(1) != Failure(1)  # attrs leaves exceptions' identity equality alone
    assert repr(Failure(1)) == "Failure(code=1)"


def test_plain_attrs_for_what_is_not_replicated() -> None:
    @_attrs.frozen(order=True)
    class Ordered:
        a: int

    assert Ordered(1) < Ordered(2)
    assert Ordered.__eq__.__code__.co_filename.startswith("<attrs generated")

    @_attrs.frozen
    class Keyed:
        a: str = attrs.field(eq=str.lower)

    assert Keyed("A") == Keyed("a") and hash(Keyed("A")) == hash(Keyed("a"))

    @_attrs.frozen
    class Base:
        a: int

    @_attrs.frozen
    class Derived(Base):
        b: int

    assert Derived(1, 2) == Derived(1, 2) != Derived(1, 3)
    assert repr(Derived(1, 2)) == "Derived(a=1, b=2)"
    assert hash(Derived(1, 2)) == hash(Derived(1, 2))

    @_attrs.define
    class Thawed(Base):  # frozen by its base, so hashable: attrs decides that
        b: int

    assert hash(Thawed(1, 2)) == hash(Thawed(1, 2))
    assert Thawed.__eq__.__code__.co_filename.startswith("<attrs generated")


@_attrs.frozen
class Pickled:
    a: int
    b: tuple[int, ...] = ()


def test_everything_else_is_attrs() -> None:
    assert pickle.loads(pickle.dumps(Pickled(1, (2,)))) == Pickled(1, (2,))
    ours = OURS["Many"](1, 2)
    assert attrs.evolve(ours, b=3) == OURS["Many"](1, 3)
    assert [f.name for f in attrs.fields(OURS["Many"])] == ["a", "b", "_c", "d", "e"]
    assert attrs.has(OURS["Many"])
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        ours.a = 5  # type: ignore[misc]
    many = OURS["Many"]
    match ours:
        case many(a, b):
            assert (a, b) == (1, 2)
        case _:
            pytest.fail("no match")


CHECK = """
import sys
sys.path.insert(0, {root!r})
import pi_agent_ask.ui.commands  # what ask imports before its first frame
compiled = []
for name, module in sorted(sys.modules.items()):
    if not name.startswith("pi_agent_ask") or module is None:
        continue
    for value in vars(module).values():
        if not (isinstance(value, type) and value.__module__ == name and "__attrs_attrs__" in vars(value)):
            continue
        for method in ("__repr__", "__eq__", "__hash__"):
            function = vars(value).get(method)
            code = getattr(function, "__code__", None)
            if code is not None and code.co_filename.startswith("<"):
                compiled.append(f"{{name}}.{{value.__qualname__}}.{{method}}")
print(len(compiled))
print("\\n".join(compiled[:20]))
"""


def test_the_ask_path_compiles_no_repr_eq_or_hash_at_import() -> None:
    """Before this change every class had its ``__repr__``, ``__eq__`` and ``__hash__``
    compiled while its module was imported (about 200 classes on ``ask``'s path)."""
    done = subprocess.run(
        [sys.executable, "-c", CHECK.format(root=str(ROOT))],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    count, *names = done.stdout.splitlines()
    assert int(count) == 0, names


def _init_shapes(api: Any) -> dict[str, type]:
    """Class shapes whose ``__init__`` is compared with plain attrs's, argument for argument."""

    @api.frozen
    class Empty:
        pass

    @api.frozen
    class Fields:
        a: Any
        _b: Any = "b"
        c: list[Any] = attrs.field(factory=list)
        d: Any = attrs.field(init=False, default=4)
        e: Any = attrs.field(init=False, factory=dict)
        f: Any = attrs.field(default=None, kw_only=True)
        g: Any = attrs.field(alias="gee", default=7)

    @api.frozen
    class Converted:
        a: tuple[Any, ...] = attrs.field(converter=tuple)
        b: str = attrs.field(default=1, converter=str)
        c: Any = attrs.field(factory=lambda: [1], converter=tuple)

    @api.frozen
    class Validated:
        a: int = attrs.field(validator=attrs.validators.instance_of(int))
        b: Any = attrs.field(default=0, validator=attrs.validators.in_((0, 1)))

    @api.frozen
    class Hooked:
        a: Any
        b: Any = attrs.field(default=attrs.Factory(lambda self: (self.a,), takes_self=True))
        calls: list[Any] = attrs.field(factory=list, kw_only=True)

        def __attrs_pre_init__(self, a: Any, b: Any, calls: Any) -> None:
            if a == "pre":
                raise ValueError(("pre", a, b, calls))

        def __attrs_post_init__(self) -> None:
            self.calls.append(("post", self.a, self.b))

    @api.frozen
    class Base:
        a: Any
        b: Any = 2

    @api.frozen
    class Derived(Base):
        c: Any = 3
        d: Any = attrs.field(kw_only=True, default=4)

    @api.frozen(slots=False)
    class Unslotted:
        a: Any

    @api.frozen
    class OverUnslotted(Unslotted):  # ``a`` lives in the instance's __dict__
        b: Any = 1

    return {
        "Empty": Empty,
        "Fields": Fields,
        "Converted": Converted,
        "Validated": Validated,
        "Hooked": Hooked,
        "Derived": Derived,
        "OverUnslotted": OverUnslotted,
    }


INIT_PLAIN = _init_shapes(attrs)
INIT_OURS = _init_shapes(_attrs)
arguments = st.one_of(st.none(), st.integers(0, 2), st.text(max_size=3), st.just("pre"))
calls = st.tuples(
    st.sampled_from(sorted(INIT_PLAIN)),
    st.lists(arguments, max_size=4),
    st.dictionaries(
        st.sampled_from(["a", "b", "_b", "c", "d", "e", "f", "g", "gee", "calls", "x"]),
        arguments,
        max_size=3,
    ),
)


def _made(cls: type, args: list[Any], kwargs: dict[str, Any]) -> tuple[str, Any]:
    try:
        instance = cls(*args, **kwargs)
    except (TypeError, ValueError) as error:
        return "raised", (type(error), str(error))
    return "made", [(a.name, getattr(instance, a.name)) for a in attrs.fields(cls)]


@given(made=st.lists(calls, min_size=1, max_size=4))
def test_init_sets_and_refuses_as_attrs_does(
    made: list[tuple[str, list[Any], dict[str, Any]]],
) -> None:
    """Same fields set to the same values (defaults, factories, converters, hooks, aliases),
    the same error with the same message, from the first call on and after it."""
    for name, args, kwargs in made:
        plain, ours = INIT_PLAIN[name], INIT_OURS[name]
        assert _made(ours, args, kwargs) == _made(plain, args, kwargs)


def test_init_defaults_are_attrs_s_own_objects() -> None:
    shared: list[Any] = []

    @_attrs.frozen
    class Defaulted:
        a: Any = shared
        b: list[Any] = attrs.field(factory=list)

    first, second = Defaulted(), Defaulted()
    assert first.a is shared and second.a is shared
    assert first.b == [] and first.b is not second.b


def test_init_sets_slots_directly_after_its_first_calls() -> None:
    """The eighth call puts attrs's ``__init__`` with each ``_setattr('name', value)`` written
    as the slot's own ``__set__`` in place; a class whose field is not a slot keeps attrs's."""
    import inspect

    fresh = _init_shapes(_attrs)
    fields, over = fresh["Fields"], fresh["OverUnslotted"]
    assert inspect.signature(fields) == inspect.signature(INIT_PLAIN["Fields"])
    for _ in range(7):
        fields(1)
        over(1)
    assert "_cached_setattr_get" in fields.__init__.__wrapped__.__code__.co_names  # attrs's
    fields(1)  # the eighth
    over(1)
    names = fields.__init__.__code__.co_names
    assert "_cached_setattr_get" not in names and "_setattr" not in names
    assert "_pi_set_a" in names and "_pi_set__b" in names
    assert fields.__init__.__qualname__ == INIT_PLAIN["Fields"].__init__.__qualname__
    assert "_cached_setattr_get" in over.__init__.__code__.co_names  # attrs's own
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        fields(1).a = 2
