"""A trace whose lines are JSON but not the records expected (an object that is no tick, a list, a header without
its keys, two traces joined, a tick line repeated) is the reader's error, naming the file, the line and the field,
for every reader and every command; what a killed or copied run leaves (a cut last line, CRLF) is still read."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from simulacra.errors import SimulacraError
from simulacra.explain import explain_tick
from simulacra.frames import read_frames
from simulacra.rescore import rescore_run
from simulacra.trace import TraceFormatError, read_header, read_trace, stream_trace
from simulacra.viewer.state import ReplayState
from tests.conftest import ROOT
from tests.test_simulation import tiny_sim

TICKS = 4


@pytest.fixture(scope="module")
def lines(tmp_path_factory, rater_url, embedder) -> list[bytes]:
    """The lines (with their newlines) of a finished 4-tick run of the tiny world (Ann, Ben, Cal)."""
    db = tmp_path_factory.mktemp("trace_input_db")
    with tiny_sim(db, rater_url, embedder, name="input") as sim:
        sim.run(TICKS)
        run_dir = sim.run_dir
    return (run_dir / "trace.jsonl").read_bytes().splitlines(keepends=True)


def write_run(folder: Path, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trace.jsonl").write_bytes(data)
    return folder


def replaced(n: int, line: bytes) -> Callable[[list[bytes]], list[bytes]]:
    """Line ``n`` (from 1) replaced by ``line``."""
    return lambda ls: ls[: n - 1] + [line] + ls[n:]


def edited_tick(n: int, edit: Callable[[dict], None]) -> Callable[[list[bytes]], list[bytes]]:
    """Line ``n``'s record changed by ``edit``."""
    def change(ls: list[bytes]) -> list[bytes]:
        record = json.loads(ls[n - 1])
        edit(record)
        return replaced(n, json.dumps(record).encode() + b"\n")(ls)
    return change


HEADER_ONLY_KEYS = b'{"type":"header","schema_version":2}\n'

#: name -> (how the run's lines are corrupted, the line the error names, what it says there)
CORRUPTIONS: dict[str, tuple[Callable[[list[bytes]], list[bytes]], int, str]] = {
    "tick line an empty object": (replaced(4, b"{}\n"), 4,
                                  r"expected a tick record \(an object with 'type': 'tick'\), got an empty object"),
    "tick line a list": (replaced(4, b"[1,2]\n"), 4, r"expected a tick record .*got a list"),
    "tick line a number": (replaced(3, b"7\n"), 3, r"expected a tick record .*got a number"),
    "tick line of another type": (edited_tick(3, lambda r: r.update(type="tock")), 3,
                                  r"expected a tick record .*got an object with 'type': \"tock\""),
    "header a list": (replaced(1, b"[1]\n"), 1, r"expected the trace header .*got a list"),
    "header with only its type and version": (replaced(1, HEADER_ONLY_KEYS), 1,
                                              r"the header has no 'agents', 'config'"),
    "header agents not a list": (edited_tick(1, lambda r: r.update(agents="ann")), 1,
                                 r"the header's 'agents' is a string, expected a list"),
    "two traces joined": (lambda ls: ls + ls, TICKS + 2, r"a second header \(two traces joined\?\)"),
    "a tick line repeated": (lambda ls: ls[:4] + ls[3:], 5, r"tick 2 follows tick 2: a line repeated"),
    "a tick line lost": (lambda ls: ls[:2] + ls[3:], 3, r"tick 2 follows tick 0: 1 tick\(s\) missing"),
    "ticks out of order": (lambda ls: [ls[0], ls[2], ls[1], *ls[3:]], 3, r"tick 0 follows tick 1: two traces joined"),
    "a tick without memory": (edited_tick(3, lambda r: r.pop("memory")), 3, r"the tick record has no 'memory'"),
    "a tick without its number": (edited_tick(2, lambda r: r.pop("tick")), 2, r"the tick record has no 'tick'"),
    "a tick number as text": (edited_tick(2, lambda r: r.update(tick="0")), 2,
                              r"'tick' is \"0\", expected a tick number"),
    "memory not a list": (edited_tick(4, lambda r: r.update(memory={})), 4, r"'memory' is an empty object"),
    "time not a number": (edited_tick(4, lambda r: r.update(time=None)), 4, r"'time' is null"),
    "a tick without conversations": (edited_tick(3, lambda r: r.pop("conversations")), 3,
                                     r"the tick record has no 'conversations'"),
    "a tick without positions or clock": (edited_tick(2, lambda r: [r.pop("positions"), r.pop("clock")]), 2,
                                          r"the tick record has no 'clock', 'positions'"),
    "conversations not a list": (edited_tick(4, lambda r: r.update(conversations={"a": 1})), 4,
                                 r"'conversations' is an object with.*expected a list"),
    "positions not an object": (edited_tick(4, lambda r: r.update(positions=[])), 4,
                                r"'positions' is a list, expected an object"),
}


def test_the_keys_checked_are_the_tick_records_required_keys():
    """The frame check and the tick record's type (what the writers write) name the same keys."""
    import typing

    from simulacra.trace import TICK_KEYS, TickRecord

    hints = typing.get_type_hints(TickRecord, include_extras=True)
    required = {k for k, v in hints.items() if typing.get_origin(v) is not typing.NotRequired} - {"type"}
    assert set(TICK_KEYS) == required


def read_all(run: Path) -> None:
    header, ticks = stream_trace(run)
    list(ticks)


#: every reader of a trace, with what it is asked (a reader may stop early, but not before line 5 of a 4-tick run)
READERS: dict[str, Callable[[Path], object]] = {
    "read_trace": read_trace,
    "stream_trace": read_all,
    "explain_tick": lambda run: explain_tick(run, "ann", 1),
    "rescore_run": rescore_run,
    "ReplayState.load": ReplayState.load,
    "read_frames": read_frames,
}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("case", CORRUPTIONS)
def test_a_line_that_is_not_the_record_expected_is_the_readers_error(lines, tmp_path, case, reader):
    corrupt, line, says = CORRUPTIONS[case]
    run = write_run(tmp_path / "bad", b"".join(corrupt(lines)))
    with pytest.raises(TraceFormatError, match=rf"bad/trace\.jsonl: line {line}: {says}"):
        READERS[reader](run)


def test_a_bad_header_is_found_by_read_header_alone(lines, tmp_path):
    run = write_run(tmp_path / "bad", HEADER_ONLY_KEYS + b"".join(lines[1:]))
    with pytest.raises(TraceFormatError, match=r"line 1: the header has no 'agents', 'config'"):
        read_header(run)


def cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "simulacra.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def assert_one_error_line(r: subprocess.CompletedProcess, *says: str) -> None:
    assert r.returncode != 0, r.stdout
    assert "Traceback" not in r.stderr, r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("simulacra: error: "), r.stderr
    for s in says:
        assert s in err[0], err[0]


@pytest.mark.parametrize("case", ["tick line an empty object", "tick line a list", "header a list",
                                  "header with only its type and version", "two traces joined",
                                  "a tick line repeated"])
def test_inspect_says_which_line_is_wrong_in_one_line(lines, tmp_path, case):
    corrupt, line, _ = CORRUPTIONS[case]
    run = write_run(tmp_path / "bad", b"".join(corrupt(lines)))
    assert_one_error_line(cli("inspect", str(run), "--agent", "ann", "--tick", "1"), f"trace.jsonl: line {line}: ")


def test_rescore_and_replay_say_which_line_is_wrong_in_one_line(lines, tmp_path):
    run = write_run(tmp_path / "bad", b"".join(replaced(4, b"{}\n")(lines)))
    assert_one_error_line(cli("rescore", str(run)), "trace.jsonl: line 4: ", "got an empty object")
    pytest.importorskip("pygame")
    assert_one_error_line(cli("replay", str(run), "--screenshot", str(tmp_path / "x.png")),
                          "trace.jsonl: line 4: ", "got an empty object")
    assert not (tmp_path / "x.png").exists()


# ------------------------------------------------------------------------------------------- what is still read
def test_an_intact_trace_reads_as_written(lines, tmp_path):
    run = write_run(tmp_path / "ok", b"".join(lines))
    header, ticks = read_trace(run)
    assert [header, *ticks] == [json.loads(x) for x in lines]
    assert [t["tick"] for t in ticks] == list(range(TICKS))


def test_a_cut_last_line_and_crlf_are_still_read(lines, tmp_path, caplog):
    cut = write_run(tmp_path / "cut", b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    with caplog.at_level("WARNING", logger="simulacra"):
        _, ticks = read_trace(cut)
    assert [t["tick"] for t in ticks] == list(range(TICKS - 1))
    assert "was cut while it was written" in caplog.text
    crlf = write_run(tmp_path / "crlf", b"".join(x.replace(b"\n", b"\r\n") for x in lines))
    assert read_trace(crlf) == read_trace(write_run(tmp_path / "lf", b"".join(lines)))


def test_garbage_a_blank_line_and_an_empty_file_stay_clean_errors(lines, tmp_path):
    with pytest.raises(TraceFormatError, match=r"line 3: Expecting value"):
        read_trace(write_run(tmp_path / "garbage", lines[0] + lines[1] + b"not json at all\n" + lines[2]))
    with pytest.raises(TraceFormatError, match=r"line 2: Expecting value"):
        read_trace(write_run(tmp_path / "blank", lines[0] + b"\n" + lines[1]))
    with pytest.raises(TraceFormatError, match=r"empty trace"):
        read_trace(write_run(tmp_path / "empty", b""))


def test_a_trace_may_start_at_a_later_tick_and_inspect_finds_ticks_by_number(lines, tmp_path):
    run = write_run(tmp_path / "later", lines[0] + b"".join(lines[2:]))  # ticks 1..3
    _, ticks = read_trace(run)
    assert [t["tick"] for t in ticks] == list(range(1, TICKS))
    assert explain_tick(run, "ann", 2)["tick"] == 2
    with pytest.raises(SimulacraError, match=rf"tick 0 is outside the trace \(1\.\.{TICKS - 1}\)"):
        explain_tick(run, "ann", 0)


def test_inspect_on_a_trace_without_ticks_says_so(lines, tmp_path):
    run = write_run(tmp_path / "new", lines[0])
    with pytest.raises(SimulacraError, match="the trace has no ticks yet") as err:
        explain_tick(run, "ann", 3)
    assert "0..-1" not in str(err.value)
    assert_one_error_line(cli("inspect", str(run), "--agent", "ann", "--tick", "3"), "the trace has no ticks yet")
