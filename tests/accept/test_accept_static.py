"""Static checks on drafted properties: each refusal code on snippets, and good ones."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.acceptance import Outcome, patch_paths
from orchestrator.core.property_lint import (
    STATIC_ORDER,
    find_function,
    parse_property_id,
    static_findings,
)
from orchestrator.core.pytest_command import NodeId
from orchestrator.errors import InputError


def codes(body: str, name: str = "test_it") -> list[str]:
    source = textwrap.dedent(body)
    ref = NodeId(node_id=f"t.py::{name}", path="t.py", names=(name,))
    return [finding.code.value for finding in static_findings(source, ref)]


# ------------------------------------------------------------------ constant assertion


@pytest.mark.parametrize(
    "statement",
    [
        "assert True",
        "assert 1",
        'assert "x"',
        "assert (1, 2)",
        "assert [0]",
        "assert {'a': 1}",
        "assert 1 == 1",
        "assert not False",
        "assert None is None",
        "assert 2 > 1",  # constant, even if the evaluator does not compute it
        "assert f'text'",
        "assert normalize(payload) or True",
    ],
)
def test_constant_assertions_are_refused(statement: str) -> None:
    found = codes(
        f"""
        def test_it(normalize):
            payload = {{"id": 1}}
            out = normalize(payload)
            assert out["id"] == 1
            {statement}
        """
    )
    assert found == ["constant_assertion"]


def test_constant_assertion_alone_is_refused_first() -> None:
    found = codes(
        """
        def test_it(normalize):
            normalize({})
            assert True
        """
    )
    assert found[0] == "constant_assertion"
    assert found == ["constant_assertion", "no_call_under_test"]


def test_assert_false_marks_an_unreachable_branch_and_is_not_constant_assertion() -> None:
    found = codes(
        """
        def test_it(parse):
            try:
                parse("bad")
            except ValueError as error:
                assert "bad" in str(error)
                return
            assert False, "parse accepted bad input"
        """
    )
    assert found == []


# ------------------------------------------------------------------ self comparison


@pytest.mark.parametrize(
    "statement",
    [
        "assert x == x",
        "assert f(a) == f(a)",
        "assert f(a) is f(a)",
        "assert not f(a) != f(a)",
        "assert f(a)['k'] >= f(a)['k']",
        "assert f(a) == 3 and f(a) == f(a)",
        "assert 0 <= f(a) == f(a)",
        "assert math.isclose(f(a), f(a))",
    ],
)
def test_self_comparisons_are_refused(statement: str) -> None:
    found = codes(
        f"""
        import math
        def test_it(f):
            a = {{"id": 1}}
            x = f(a)
            {statement}
        """
    )
    assert found[0] == "self_comparison"


def test_two_fresh_returns_through_names_are_a_self_comparison() -> None:
    found = codes(
        """
        def test_it(normalize_event):
            payload = {"id": "evt-1"}
            first = normalize_event(payload)
            second = normalize_event(payload)
            assert first == second
        """
    )
    assert found == ["self_comparison", "no_call_under_test"]


def test_unittest_assert_equal_with_itself_is_a_self_comparison() -> None:
    source = textwrap.dedent(
        """
        class TestT:
            def test_it(self):
                out = compute(3)
                self.assertEqual(out, out)
        """
    )
    ref = parse_property_id("t.py::TestT::test_it")
    assert [f.code for f in static_findings(source, ref)] == [
        Outcome.SELF_COMPARISON,
        Outcome.NO_CALL_UNDER_TEST,
    ]


def test_a_literal_bound_to_a_name_and_compared_with_itself() -> None:
    found = codes(
        """
        def test_it(normalize):
            normalize({"id": 1})
            n = 1
            assert n == 1
        """
    )
    assert found == ["self_comparison", "no_call_under_test"]


def test_state_read_before_and_after_a_call_is_not_a_self_comparison() -> None:
    found = codes(
        """
        def test_it(store):
            before = len(store.rows())
            store.add_nothing()
            assert len(store.rows()) == before
        """
    )
    assert found == []


# ------------------------------------------------------------------ no assertion


@pytest.mark.parametrize(
    "body",
    [
        "    normalize({'id': 1})\n",
        "    result = normalize({'id': 1})\n    print(result)\n",
        "    pass\n",
        "    '''only a docstring'''\n",
    ],
)
def test_no_assertion_is_refused(body: str) -> None:
    source = "def test_it(normalize):\n" + body
    ref = parse_property_id("t.py::test_it")
    assert [f.code for f in static_findings(source, ref)] == [Outcome.NO_ASSERTION]


def test_pytest_raises_counts_as_an_assertion() -> None:
    found = codes(
        """
        import pytest
        def test_it(parse):
            with pytest.raises(ValueError):
                parse("not a date")
        """
    )
    assert found == []


def test_inline_pytest_raises_counts_as_an_assertion() -> None:
    found = codes(
        """
        import pytest
        def test_it(parse):
            pytest.raises(ValueError, parse, "not a date")
        """
    )
    assert found == []


@pytest.mark.parametrize(
    "check",
    [
        "with self.assertRaises(ValueError):\n            parse('x')",
        "with self.assertRaisesRegex(ValueError, 'bad'):\n            parse('x')",
        "self.assertRaises(ValueError, parse, 'x')",
        "self.assertRaisesRegex(ValueError, 'bad', parse, 'x')",
        "with self.assertWarns(UserWarning):\n            parse('x')",
    ],
)
def test_unittest_exception_checks_count_as_assertions(check: str) -> None:
    source = f"class TestP:\n    def test_it(self):\n        {check}\n"
    ref = parse_property_id("t.py::TestP::test_it")
    assert static_findings(source, ref) == ()


def test_unittest_exception_check_around_no_code_under_test() -> None:
    source = "class TestP:\n    def test_it(self):\n        self.assertRaises(KeyError, dict)\n"
    ref = parse_property_id("t.py::TestP::test_it")
    assert [f.code.value for f in static_findings(source, ref)] == ["no_call_under_test"]


def test_a_module_helper_that_asserts_counts_as_an_assertion_on_its_arguments() -> None:
    helper = """
        def assert_one_line_error(run, fragment):
            assert fragment in run.err
        """
    assert codes(helper + """
        def test_it(cli):
            assert_one_line_error(cli("classify", "absent.json"), "no such file")
        """) == []  # fmt: skip
    assert codes(helper + """
        def test_it(cli):
            cli("classify", "absent.json")
            assert_one_line_error("literal", "no such file")
        """) == ["no_call_under_test"]  # fmt: skip


def test_a_method_of_the_test_class_that_asserts_counts_as_an_assertion() -> None:
    source = textwrap.dedent(
        """
        class TestP:
            def check_round_trip(self, text):
                self.assertEqual(parse(text).text, text)
            def test_it(self):
                self.check_round_trip(render(3))
            def test_literal(self):
                self.check_round_trip("abc")
            def check_length(self, items, n):
                self.assertEqual(len(items), n)
            def test_length_of_a_literal(self):
                self.check_length([1, 2], 2)
        """
    )
    for name in ("test_it", "test_literal"):  # the helper calls parse itself
        assert static_findings(source, parse_property_id(f"t.py::TestP::{name}")) == ()
    literal = static_findings(source, parse_property_id("t.py::TestP::test_length_of_a_literal"))
    assert [f.code.value for f in literal] == ["no_call_under_test"]


def test_a_helper_without_assertions_is_just_a_call() -> None:
    found = codes(
        """
        def show(run):
            print(run)
        def test_it(cli):
            show(cli("x"))
        """
    )
    assert found == ["no_assertion"]


# ------------------------------------------------------------------ no call under test


@pytest.mark.parametrize(
    "body",
    [
        # the output is computed but never inspected
        """
        def test_it(normalize):
            out = normalize({"id": 1})
            expected = {"id": 1}
            assert expected["id"] == 1
        """,
        # only literals and builtins feed the assertion
        """
        def test_it(normalize):
            normalize({"id": 1})
            assert len([1, 2]) == 2
        """,
        # a fresh clock whose reads are checked, but it was never handed to the code
        """
        def test_it(normalize, deps):
            clock = deps.clock(start=0)
            normalize({"id": 1})
            assert clock.reads == 0
        """,
        # pytest.raises around code that is not under test
        """
        import pytest
        def test_it():
            with pytest.raises(ValueError):
                raise ValueError("x")
        """,
        # an input is inspected, not an output
        """
        def test_it(replay_fixture):
            payload = dict(replay_fixture)
            assert payload["id"] == "evt-1"
        """,
    ],
)
def test_no_call_under_test_feeding_an_assertion_is_refused(body: str) -> None:
    assert codes(body) == ["no_call_under_test"]


# ------------------------------------------------------------------ good properties


@pytest.mark.parametrize(
    "body",
    [
        # seed 001's budget property: the clock passed in, its reads asserted
        """
        def test_clock_budget(normalize_event, deps):
            clock = deps.clock(start=0)
            payload = {"id": "evt-1", "ts": "1970-01-01T00:00:00Z"}
            normalize_event(payload, now=clock)
            assert clock.reads == 1
        """,
        # seed 001's text verbatim: a clock fixture handed in, its calls asserted
        """
        def test_clock_budget(normalize_event, clock):
            payload = {"id": "evt-1", "ts": "1970-01-01T00:00:00Z"}
            normalize_event(payload, now=clock)
            assert clock.calls == 1
        """,
        # the count read through the deps fixture instead of the clock
        """
        def test_clock_budget(normalize_event, deps):
            normalize_event({"id": "evt-1"}, now=deps.clock())
            assert deps.calls["clock"] == 1
        """,
        # a spy handed in through a keyword
        """
        def test_clock_budget(normalize_event, deps):
            spy = deps.spy("db", lambda row: None)
            normalize_event({"id": "evt-1"}, sink=spy)
            assert deps.calls["db"] == 1
        """,
        # an output traced through names
        """
        def test_clock_budget(normalize_event, replay_fixture):
            out = normalize_event(replay_fixture)
            keys = sorted(out)
            assert keys == ["id", "ts"]
        """,
        # the call inside the assertion
        """
        from example import normalize_event
        def test_clock_budget():
            assert normalize_event({"id": "e"})["id"] == "e"
        """,
        # an effect on an argument (a method call mutates its object)
        """
        def test_clock_budget(make_queue):
            queue = make_queue()
            queue.push(3)
            assert queue.size == 1
        """,
        # an output collected in a loop
        """
        def test_clock_budget(normalize_event):
            results = []
            for n in range(3):
                results.append(normalize_event({"id": n}))
            assert [r["id"] for r in results] == [0, 1, 2]
        """,
        # hypothesis property
        """
        from hypothesis import given, strategies as st
        @given(st.integers())
        def test_clock_budget(n):
            assert encode(n) >= 0
        """,
    ],
)
def test_good_properties_have_no_findings(body: str) -> None:
    assert codes(body, name="test_clock_budget") == []


def test_findings_come_in_fixed_order_with_lines() -> None:
    source = textwrap.dedent(
        """
        def test_it(f):
            out = f(1)
            assert out == out
            assert True
        """
    )
    ref = parse_property_id("t.py::test_it")
    findings = static_findings(source, ref)
    assert [f.code for f in findings] == [
        Outcome.CONSTANT_ASSERTION,
        Outcome.SELF_COMPARISON,
        Outcome.NO_CALL_UNDER_TEST,
    ]
    assert [f.line for f in findings] == [5, 4, 2]
    assert "out == out" in findings[1].detail
    assert findings[0].to_json()["code"] == "constant_assertion"


# ------------------------------------------------------------------ node ids


@pytest.mark.parametrize(
    ("node_id", "path", "classes", "function"),
    [
        (
            "tests/test_budget.py::test_clock_budget",
            "tests/test_budget.py",
            (),
            "test_clock_budget",
        ),
        ("t.py::TestA::test_b", "t.py", ("TestA",), "test_b"),
        ("t.py::TestA::TestInner::test_b", "t.py", ("TestA", "TestInner"), "test_b"),
        ("t.py::test_b[1-x]", "t.py", (), "test_b"),
        ("t.py::test_b[a::b]", "t.py", (), "test_b"),
        ("t.py::TestA::test_b[x]", "t.py", ("TestA",), "test_b"),
    ],
)
def test_property_ids_map_to_file_and_function(
    node_id: str, path: str, classes: tuple[str, ...], function: str
) -> None:
    ref = parse_property_id(node_id)
    assert (ref.path, ref.classes, ref.function) == (path, classes, function)


@pytest.mark.parametrize("node_id", ["", "t.py", "t.py::", "::test", "t.txt::test", "t.py::1x"])
def test_bad_property_ids_are_input_errors(node_id: str) -> None:
    with pytest.raises(InputError):
        parse_property_id(node_id)


def test_parametrized_id_finds_the_function_in_a_class() -> None:
    source = "class TestA:\n    def test_b(self, n):\n        assert f(n) == n\n"
    node = find_function(source, parse_property_id("t.py::TestA::test_b[3]"))
    assert node.name == "test_b"
    assert node.lineno == 2


@pytest.mark.parametrize(
    ("source", "node_id", "message"),
    [
        ("def test_a():\n    assert f()\n", "t.py::test_b", "no test function"),
        ("def test_a():\n    assert f()\n", "t.py::TestX::test_a", "no class"),
        ("def test_a(:\n", "t.py::test_a", "not valid Python"),
    ],
)
def test_missing_functions_and_bad_syntax_are_input_errors(
    source: str, node_id: str, message: str
) -> None:
    with pytest.raises(InputError, match=message):
        find_function(source, parse_property_id(node_id))


def test_patch_paths_reads_diff_headers() -> None:
    patch = textwrap.dedent(
        """\
        diff --git a/src/ev.py b/src/ev.py
        --- a/src/ev.py
        +++ b/src/ev.py
        @@ -1 +1 @@
        -x
        +y
        --- /dev/null
        +++ b/new.py\t2024-01-01
        """
    )
    assert patch_paths(patch) == ("new.py", "src/ev.py")


# ------------------------------------------------------------------ properties


_literals = st.one_of(
    st.integers(),
    st.text(max_size=5),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
)


@given(_literals)
def test_any_truthy_literal_assertion_is_constant(value: object) -> None:
    source = f"def test_it(f):\n    out = f(1)\n    assert out == 2\n    assert {value!r}\n"
    found = codes(source)
    if value:
        assert found == ["constant_assertion"]
    else:
        assert found == []  # a false literal marks an unreachable branch


_identifiers = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda name: name not in {"and", "or", "not", "is", "in", "if", "for", "def", "as", "f"}
)


@given(_identifiers, st.sampled_from(["==", "is", "<=", ">=", "!=", "<"]))
def test_any_expression_compared_with_itself_is_refused(name: str, op: str) -> None:
    source = f"def test_it(f):\n    {name}_v = f(1)\n    assert f({name}_v) {op} f({name}_v)\n"
    found = codes(source)
    assert found[0] == "self_comparison"


@given(_identifiers)
def test_any_output_compared_with_a_literal_is_accepted(name: str) -> None:
    source = f"def test_it(f):\n    {name}_v = f(1)\n    assert {name}_v == 2\n"
    assert codes(source) == []


def test_static_order_is_the_documented_one() -> None:
    assert [code.value for code in STATIC_ORDER] == [
        "constant_assertion",
        "self_comparison",
        "no_assertion",
        "no_call_under_test",
    ]
