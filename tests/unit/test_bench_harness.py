"""bench/harness.py: the shared options, the timer of named durations and the printed table."""

from __future__ import annotations

import pytest

from bench.harness import Timer, arguments, table


def test_arguments_adds_the_shared_options_asked_for_with_the_scripts_defaults():
    parser = arguments("Benchmark something.\n\nMore words.", repeats=3, threads=1, device="cpu")
    parser.add_argument("--pages", type=int, default=10)
    args = parser.parse_args(["--repeats", "2", "--pages", "4"])
    assert (args.repeats, args.threads, args.device, args.pages) == (2, 1, "cpu", 4)
    assert parser.description == "Benchmark something."
    assert not hasattr(args, "seed")


def test_arguments_names_the_shared_options_on_a_typo():
    with pytest.raises(ValueError, match=r"\['repeat'\].*'repeats'"):
        arguments("Doc.", repeat=3)


def test_timer_records_each_run_by_name_and_none_for_a_failed_one():
    timer = Timer()
    for _ in range(3):
        with timer("parse") as lap:
            pass
        assert lap.name == "parse" and lap.seconds >= 0
    with pytest.raises(RuntimeError), timer("embed"):
        raise RuntimeError("boom")
    assert len(timer.runs["parse"]) == 3 and "embed" not in timer.runs
    timer.runs["parse"] = [0.5, 0.2, 0.4]
    assert (timer.best("parse"), timer.last("parse"), timer.total("parse")) == (0.2, 0.4, pytest.approx(1.1))
    timer.runs["write"] = [0.1]
    assert timer.seconds() == {"parse": 0.4, "write": 0.1}


def test_table_lines_up_markdown_rows_with_a_ratio_to_the_reference_row():
    text = table(["run", "pages/s", "found"], [("reference", 200.0, 7), ("parse", 50.0, 12)],
                 formats={"pages/s": ".1f"}, ratio_of="pages/s", ratio_title="× ref")
    assert text.splitlines() == [
        "| run       | pages/s | × ref | found |",
        "| --------- | ------: | ----: | ----: |",
        "| reference |   200.0 | 1.000 |     7 |",
        "| parse     |    50.0 | 0.250 |    12 |",
    ]


def test_table_shows_a_dash_where_the_reference_is_zero_or_a_cell_is_missing():
    lines = table(["run", "s"], [("a", 0.0), ("b", None)], ratio_of="s").splitlines()
    assert lines[2:] == ["| a   | 0.00 |     - |", "| b   |    - |     - |"]


def test_table_refuses_rows_of_the_wrong_length():
    with pytest.raises(ValueError, match="2 cells"):
        table(["run", "s"], [("a",)])
