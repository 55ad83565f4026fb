"""The evaluators as pure functions: exact_match, must_include, url_match, db."""

import sqlite3

import pytest

from esopt.web.checks import normalize, passes, url_matches
from esopt.web.task import Check


def test_exact_match_normalizes_case_space_quotes_and_period():
    check = Check("exact_match", ("Alice Smith",))
    assert passes(check, '  "alice   smith." ', "")
    assert not passes(check, "Alice Smith Jr", "")
    assert not passes(check, None, "")
    assert normalize("'Hello World.'") == "hello world"


def test_must_include_needs_every_reference_as_a_whole_token():
    check = Check("must_include", ("12.3", "km"))
    assert passes(check, "It is 12.3 km.", "")
    assert not passes(check, "It is 112.3 km", "")
    assert not passes(check, "It is 12.35 km", "")
    assert not passes(check, "12.3 miles", "")
    assert passes(Check("must_include", ("12.50",)), "$12.50", "")


def test_url_match_compares_path_and_reference_parameters():
    ref = "/directions?from=A+b&to=C&mode=driving"
    assert url_matches("http://127.0.0.1:1/directions?mode=driving&to=C&from=a%20b&x=1", ref)
    assert not url_matches("http://127.0.0.1:1/directions?from=A+b&to=C&mode=walking", ref)
    assert not url_matches("http://127.0.0.1:1/direction?from=A+b&to=C&mode=driving", ref)
    assert url_matches("http://h/u/bob/", "/u/bob")
    assert passes(Check("url_match", ("/u/bob",)), None, "http://h/u/bob")


def test_db_check_compares_query_rows(tmp_path):
    path = tmp_path / "x.sqlite"
    con = sqlite3.connect(path)
    con.executescript("CREATE TABLE t (a TEXT, b INTEGER); INSERT INTO t VALUES ('x', 1);")
    con.commit()
    con.close()
    check = Check("db", sql="SELECT b FROM t WHERE a = ?", params=("x",), expected=((1,),))
    assert passes(check, None, "", path)
    assert not passes(Check("db", sql="SELECT b FROM t", expected=((2,),)), None, "", path)
    assert not passes(check, None, "", tmp_path / "missing.sqlite")
    assert not passes(check, None, "", None)


def test_check_kinds_are_validated():
    with pytest.raises(ValueError, match="kind"):
        Check("llm_judge", ("x",))
    with pytest.raises(ValueError, match="sql"):
        Check("db")
    with pytest.raises(ValueError, match="sql"):
        Check("exact_match", ("x",), sql="SELECT 1")
