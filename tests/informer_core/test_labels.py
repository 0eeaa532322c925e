"""Label selectors behave as apimachinery's ``labels`` package (its test tables, translated)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import informer_core
from informer_core.errors import SelectorError
from informer_core.labels import (
    Operator,
    Requirement,
    Selector,
    everything,
    parse_selector,
    selector_from_set,
)

# Each good string re-prints as itself once spaces are removed.
GOOD = ["x=a,y=b,z=c", "", "x!=a,y=b", "x=", "x= ", "x=,z= ", "x= ,z= ", "!x", "x>1", "x>1,z<5"]
BAD = ["x=a||y=b", "x==a==b", "!x=a", "x<a"]


@pytest.mark.parametrize("text", GOOD)
def test_good_selectors_parse_and_reprint_canonically(text):
    assert str(parse_selector(text)) == text.replace(" ", "")


@pytest.mark.parametrize("text", BAD)
def test_bad_selectors_raise_selector_error(text):
    with pytest.raises(SelectorError):
        parse_selector(text)


def test_parse_is_deterministic_whatever_the_written_order():
    assert str(parse_selector("x=a,a=x")) == str(parse_selector("a=x,x=a")) == "a=x,x=a"


@pytest.mark.parametrize("selector,labels,expected", [
    ("", {"x": "y"}, True),
    ("x=y", {"x": "y"}, True),
    ("x=y,z=w", {"x": "y", "z": "w"}, True),
    ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
    ("notin=in", {"notin": "in"}, True),  # keywords are plain words in exact matches
    ("x", {"x": "z"}, True),
    ("!x", {"y": "z"}, True),
    ("x>1", {"x": "2"}, True),
    ("x<1", {"x": "0"}, True),
    ("x=z", {}, False),
    ("x=y", {"x": "z"}, False),
    ("x=y,z=w", {"x": "w", "z": "w"}, False),
    ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
    ("x", {"y": "z"}, False),
    ("!x", {"x": "z"}, False),
    ("x>1", {"x": "0"}, False),
    ("x<1", {"x": "2"}, False),
    ("foo=bar,foobar=bar,baz=blah", {"foo": "bar", "baz": "blah"}, False),
    ("x notin (),y", {"y": ""}, True),
    ("!x,y", {"y": ""}, True),
    ("x notin (),!y", {"y": ""}, False),
    ("x in ()", {"y": "baz"}, False),
    ("z>1", {"z": "v2"}, False),  # a non-integer label never satisfies gt/lt
    ("x!=y", None, True),
    ("x", None, False),
])
def test_matches(selector, labels, expected):
    assert parse_selector(selector).matches(labels) is expected


def test_everything_matches_all_and_is_empty():
    assert everything().matches({"x": "y"})
    assert everything().empty()
    assert parse_selector("").empty()
    assert parse_selector("   ").empty()
    assert not parse_selector("x").empty()


def test_selector_from_set():
    labels = {"foo": "bar", "baz": "blah"}
    assert selector_from_set({}).matches(labels)
    assert selector_from_set(None).empty()
    assert selector_from_set({"foo": "bar"}).matches(labels)
    assert selector_from_set({"foo": "bar", "baz": "blah"}).matches(labels)
    assert not selector_from_set({"foo": "baz"}).matches(labels)
    assert str(selector_from_set({"z": "1", "a": "2"})) == "a=2,z=1"


@pytest.mark.parametrize("key,op,values,ok", [
    ("x", Operator.IN, [], False),
    ("x", Operator.NOT_IN, [], False),
    ("x", Operator.IN, ["foo"], True),
    ("x", Operator.NOT_IN, ["foo"], True),
    ("x", Operator.EXISTS, [], True),
    ("x", Operator.DOES_NOT_EXIST, [], True),
    ("1foo", Operator.IN, ["bar"], True),
    ("1234", Operator.IN, ["bar"], True),
    ("y", Operator.GREATER_THAN, ["1"], True),
    ("z", Operator.LESS_THAN, ["6"], True),
    ("foo", Operator.GREATER_THAN, ["bar"], False),
    ("barz", Operator.LESS_THAN, ["blah"], False),
    ("a" * 254, Operator.EXISTS, [], False),
    ("x", Operator.EQUALS, ["a", "b"], False),
    ("x", Operator.EXISTS, ["a"], False),
    ("x", "bogus", ["a"], False),
])
def test_requirement_constructor_validates(key, op, values, ok):
    if ok:
        Requirement(key, op, values)
    else:
        with pytest.raises(SelectorError):
            Requirement(key, op, values)


@pytest.mark.parametrize("requirements,expected", [
    ([("x", "in", ["abc", "def"]), ("y", "notin", ["jkl"]), ("z", "exists", [])],
     "x in (abc,def),y notin (jkl),z"),
    ([("x", "notin", ["abc", "def"]), ("y", "!=", ["jkl"]), ("z", "!", [])],
     "x notin (abc,def),y!=jkl,!z"),
    ([("x", "notin", ["abc"]), ("y", "in", ["jkl", "mno"]), ("z", "notin", [""])],
     "x notin (abc),y in (jkl,mno),z notin ()"),
    ([("x", "=", ["abc"]), ("y", "==", ["jkl"]), ("z", "!=", ["a"]), ("z", "exists", [])],
     "x=abc,y==jkl,z!=a,z"),
    ([("x", "gt", ["2"]), ("y", "lt", ["8"]), ("z", "exists", [])], "x>2,y<8,z"),
])
def test_to_string(requirements, expected):
    selector = Selector(Requirement(k, op, v) for k, op, v in requirements)
    assert str(selector) == expected


@pytest.mark.parametrize("text,expected", [
    ("\rx", [("x", "exists", [])]),
    ("this-is-a-dns.domain.com/key-with-dash", [("this-is-a-dns.domain.com/key-with-dash", "exists", [])]),
    ("this-is-another-dns.domain.com/key-with-dash in (so,what)",
     [("this-is-another-dns.domain.com/key-with-dash", "in", ["so", "what"])]),
    ("0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
     [("0.1.2.domain/99", "notin", ["10.10.100.1", "tick.tack.clock"])]),
    ("foo  in\t (abc)", [("foo", "in", ["abc"])]),
    ("x notin\n (abc)", [("x", "notin", ["abc"])]),
    ("x  notin\t\t\t(abc,def)", [("x", "notin", ["abc", "def"])]),
    ("x in (abc,)", [("x", "in", ["abc", ""])]),
    ("x in ()", [("x", "in", [""])]),
    ("x notin (abc,,def),bar,z in (),w",
     [("bar", "exists", []), ("w", "exists", []), ("x", "notin", ["abc", "", "def"]),
      ("z", "in", [""])]),
    ("x=a", [("x", "=", ["a"])]),
    ("x>1", [("x", "gt", ["1"])]),
    ("x<7", [("x", "lt", ["7"])]),
    ("x=a,y!=b,z in (h,i,j)", [("x", "=", ["a"]), ("y", "!=", ["b"]), ("z", "in", ["h", "i", "j"])]),
    ("x notin ( )", [("x", "notin", [""])]),
    ("x notin (, a)", [("x", "notin", ["", "a"])]),
    ("a ", [("a", "exists", [])]),
    ("a in (x,y,notin, z,in)", [("a", "in", ["in", "notin", "x", "y", "z"])]),
    ("x,y in (a)", [("x", "exists", []), ("y", "in", ["a"])]),
    ("x,y", [("x", "exists", []), ("y", "exists", [])]),
    ("a in (,,)", [("a", "in", [""])]),
    ("a in (b,,)", [("a", "in", ["", "b"])]),
])
def test_set_based_parse_builds_the_expected_requirements(text, expected):
    got = [(r.key, r.operator.value, list(r.values)) for r in parse_selector(text).requirements]
    assert got == [(k, Operator(op).value, sorted(set(v))) for k, op, v in expected]


@pytest.mark.parametrize("text", [
    "x=a||y=b", "x,,y", ",x,y", "x nott in (y)", "a in (xyz),", "a in (xyz)b notin ()",
    "a in (xyz abc)", "a notin(", "a (", "(", "x=a,,y", "a/b/c", "/a", "a/", "-a",
    "a" * 64, "Bad_Prefix/a", "x=" + "v" * 64, "x>1.5", "x in (a b)", "x!",
])
def test_invalid_set_based_selectors_are_rejected(text):
    with pytest.raises(SelectorError):
        parse_selector(text)


def test_same_key_requirements_keep_their_written_order():
    assert str(parse_selector("b,a!=1,a")) == "a!=1,a,b"
    assert str(parse_selector("a,a!=1")) == "a,a!=1"


def test_double_equals_stays_double_equals():
    assert str(parse_selector("a==b")) == "a==b"


@pytest.mark.parametrize("text,column,token", [
    ("a=b,=c", 5, "'='"),
    ("app in (web,db", 15, "end of string"),
    ("app=web tier=db", 9, "'tier'"),
    ("app=w@b", 5, "'w@b'"),
    ("bad key=1", 5, "'key'"),
])
def test_errors_point_at_the_bad_token(text, column, token):
    with pytest.raises(SelectorError) as info:
        parse_selector(text)
    message = str(info.value)
    assert f"column {column}" in message
    assert token in message
    assert repr(text) in message


def test_selector_error_is_a_value_error_importable_everywhere():
    assert issubclass(SelectorError, ValueError)
    assert informer_core.SelectorError is SelectorError
    from informer_core import labels
    assert labels.SelectorError is SelectorError


def test_numeric_requirements_use_go_int64_parsing():
    assert parse_selector("x>9223372036854775806").matches({"x": "9223372036854775807"})
    assert not parse_selector("x>1").matches({"x": "9223372036854775808"})  # overflows int64
    assert not parse_selector("x>1").matches({"x": "1_000"})
    with pytest.raises(SelectorError):
        parse_selector("x>9223372036854775808")


_ALPHABET = st.sampled_from(list("abcxyz019 -_./=!(),<>\t\\@\u00e9") + ["in", "notin", "=="])


@settings(max_examples=3000, deadline=None)
@given(st.lists(_ALPHABET, max_size=30).map("".join))
def test_fuzz_malformed_selectors_only_ever_raise_selector_error(text):
    try:
        selector = parse_selector(text)
    except SelectorError:
        return
    # Whatever parses re-prints to a canonical form that parses to the same selector.
    again = parse_selector(str(selector))
    assert again == selector
    assert str(again) == str(selector)


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=40))
def test_fuzz_arbitrary_text_only_ever_raises_selector_error(text):
    try:
        parse_selector(text)
    except SelectorError:
        pass


_KEYS = st.sampled_from(["a", "b", "app", "example.com/x"])
_VALUES = st.sampled_from(["", "1", "2", "web", "db"])


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(_KEYS, _VALUES, max_size=4), st.lists(
    st.tuples(_KEYS, st.sampled_from(["=", "!=", "in", "notin", "exists", "!", "gt", "lt"]),
              st.lists(_VALUES, min_size=1, max_size=3)), min_size=1, max_size=3))
def test_matches_agrees_with_a_brute_force_reading(labels, reqs):
    parts = []
    for key, op, values in reqs:
        if op in ("=", "!="):
            parts.append(f"{key}{op}{values[0]}")
        elif op in ("in", "notin"):
            parts.append(f"{key} {op} ({','.join(values)})")
        elif op == "exists":
            parts.append(key)
        elif op == "!":
            parts.append("!" + key)
        else:
            num = values[0] if values[0].isdigit() else "1"
            parts.append(f"{key}{'>' if op == 'gt' else '<'}{num}")
    selector = parse_selector(",".join(parts))

    def holds(key, op, values):
        have = labels.get(key)
        if op == "=":
            return have == values[0]
        if op == "!=":
            return have != values[0]
        if op == "in":
            return have is not None and have in values
        if op == "notin":
            return have is None or have not in values
        if op == "exists":
            return have is not None
        if op == "!":
            return have is None
        num = int(values[0]) if values[0].isdigit() else 1
        if have is None or not have.isdigit():
            return False
        return int(have) > num if op == "gt" else int(have) < num

    assert selector.matches(labels) == all(holds(*r) for r in reqs)
