"""The math problems' JSONL loader (`data: path.jsonl`): every refused line is named by its
file and its line in the file (issue 35: a bad line 2 was reported as "line 1", with no
file name)."""

import pytest

from esopt.data.files import DataFileError
from esopt.data.math import load_jsonl, load_problems

GOOD = ['{"question": "1+1?", "answer": "2"}', '{"id": "b", "question": "2+2?", "answer": 4}']


def _file(tmp_path, *lines: bytes | str):
    path = tmp_path / "problems.jsonl"
    path.write_bytes(b"\n".join(x if isinstance(x, bytes) else x.encode() for x in lines) + b"\n")
    return path


def test_a_file_loads_in_order_with_ids_that_count_records(tmp_path):
    path = _file(tmp_path, GOOD[0], "", GOOD[1], '{"question": "3?", "answer": "3"}')
    problems = load_problems(str(path))
    assert [(p.id, p.question, p.answer) for p in problems] == [
        ("problems.jsonl:0", "1+1?", "2"), ("b", "2+2?", "4"), ("problems.jsonl:2", "3?", "3")]


@pytest.mark.parametrize("line, why", [
    ('{"question": "2+2?" "answer": "4"}', "not JSON: Expecting ',' delimiter at column 21"),
    ('{"question": "2+2?"}', "needs 'question' and 'answer', has ['question']"),
    ('["2+2?", "4"]', "expected a JSON object, got list"),
    ('{"question": [{"role": "system"}], "answer": "4"}',
     "'question' is neither text nor a chat list with a user message"),
    (b'{"question": "\xff", "answer": "4"}', "not UTF-8 text (byte 0xff at column 15)"),
    (b"[" * 100_000, "JSON nested too deeply to read"),
])
def test_a_bad_line_is_named_by_file_and_line(tmp_path, line, why):
    path = _file(tmp_path, GOOD[0], "", line, GOOD[1])
    with pytest.raises(DataFileError) as err:
        load_jsonl(path)
    assert str(err.value) == f"{path}, line 3: {why}"


def test_a_byte_order_mark_is_read_as_the_start_of_the_file(tmp_path):
    path = _file(tmp_path, b"\xef\xbb\xbf" + GOOD[0].encode(), GOOD[1])
    assert [p.answer for p in load_jsonl(path)] == ["2", "4"]
