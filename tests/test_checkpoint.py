"""The checkpoint journal: whole checkpoints and patches read back to exactly what was written, a line cut by a
kill is not read, compaction starts a new base and voids the old journal."""

from __future__ import annotations

import copy
import json
import random
import zlib

import pytest

from simulacra.checkpoint import JOURNAL, CheckpointWriter, apply_patch, diff, read_checkpoint
from simulacra.errors import CheckpointError


def town(rng: random.Random, prev: dict | None) -> dict:
    """The next checkpoint-like data: ids appended and deleted, keys added and removed, values changed."""
    d = copy.deepcopy(prev) if prev else {"ticks_done": 0, "trace_bytes": 0, "state": {"agents": {}}, "memory": {},
                                          "layers": {"rater": {"ratings": {}}}}
    d["ticks_done"] += 1
    d["trace_bytes"] += rng.randint(100, 900)
    for agent in ("ann", "ben"):
        tiers = d["memory"].setdefault(agent, {"short_term": [], "long_term": []})
        tiers["short_term"] = tiers["short_term"] + [f"{agent}-{d['ticks_done']}-{i}" for i in range(rng.randint(0, 3))]
        if tiers["short_term"] and rng.random() < 0.4:  # consolidation: one moves to long-term
            moved = tiers["short_term"].pop(rng.randrange(len(tiers["short_term"])))
            tiers["long_term"] = tiers["long_term"] + [moved]
        a = d["state"]["agents"].setdefault(agent, {"knows": [], "action": None})
        a["action"] = {"activity": f"thing {rng.randint(0, 5)}", "place": rng.choice(["well", "shop"])}
        if rng.random() < 0.3:
            a["knows"] = sorted(set(a["knows"]) | {f"news {rng.randint(0, 9)}"})
        if rng.random() < 0.2:
            a.pop("partner", None) if "partner" in a else a.update(partner=rng.choice(["ann", "ben"]))
    d["layers"]["rater"]["ratings"][f"text {d['ticks_done']}"] = rng.randint(1, 10)
    return d


def test_patches_turn_any_value_into_the_next():
    rng = random.Random(5)
    prev = town(rng, None)
    for _ in range(40):
        nxt = town(rng, prev)
        patch = diff(prev, nxt)
        assert json.loads(json.dumps(apply_patch(copy.deepcopy(prev), patch))) == nxt
        prev = nxt
    assert diff(prev, copy.deepcopy(prev)) is None
    assert diff([1, 2], [1, 2, 3]) == {"+": [3]} and diff([1, 2], [2]) == {"=": [2]} and diff(1, 1.0) == {"=": 1.0}


def test_the_journal_reads_back_every_checkpoint_and_compacts(tmp_path):
    rng = random.Random(7)
    writer = CheckpointWriter(tmp_path, min_journal_bytes=4000)
    data = None
    for _ in range(60):
        data = town(rng, data)
        writer.write(data)
        got = read_checkpoint(tmp_path)
        assert {k: v for k, v in got.items() if k not in ("version", "base")} == data
    assert writer.wholes >= 2 and writer.patches > 40  # compacted at least once, mostly journal lines
    base = (tmp_path / "checkpoint.json").stat().st_size
    lines = (tmp_path / JOURNAL).read_bytes().splitlines(keepends=True)
    assert sum(map(len, lines[:-1])) <= max(4000, base)  # the limit; the line that passed it was the last


def test_a_checkpoint_of_an_unchanged_state_reads_back(tmp_path):
    """A checkpoint taken again before any tick (a scenario's set-up that changed nothing) is an empty patch; a
    journal line holding a null patch (as older writers wrote it) is read as no change."""
    rng = random.Random(3)
    writer = CheckpointWriter(tmp_path)
    data = town(rng, None)
    writer.write(data)
    writer.write(copy.deepcopy(data))
    assert {k: v for k, v in read_checkpoint(tmp_path).items() if k not in ("version", "base")} == data
    base = json.loads((tmp_path / "checkpoint.json").read_text())["base"]
    body = json.dumps({"base": base, "patch": None}).encode()
    with (tmp_path / JOURNAL).open("ab") as fh:
        fh.write(f"{zlib.crc32(body):08x} ".encode() + body + b"\n")
    assert {k: v for k, v in read_checkpoint(tmp_path).items() if k not in ("version", "base")} == data


def test_a_line_cut_by_a_kill_leaves_the_previous_checkpoint(tmp_path):
    rng = random.Random(9)
    writer = CheckpointWriter(tmp_path)
    first = town(rng, None)
    writer.write(first)
    second = town(rng, first)
    writer.write(second)
    journal = tmp_path / JOURNAL
    good = journal.read_bytes()
    writer.write(town(rng, second))
    line = journal.read_bytes()[len(good):]
    journal.write_bytes(good + line[: len(line) // 2])  # cut in the middle
    assert read_checkpoint(tmp_path)["ticks_done"] == second["ticks_done"]
    journal.write_bytes(good + line[:-3] + b"X" + line[-2:])  # a byte changed: the checksum does not match
    assert read_checkpoint(tmp_path)["ticks_done"] == second["ticks_done"]
    # a new writer (a resumed run) starts with a whole checkpoint; the old journal lines are void
    again = CheckpointWriter(tmp_path)
    again.write(first)
    journal.write_bytes(good)  # as if the kill came between the new base and emptying the journal
    assert read_checkpoint(tmp_path)["ticks_done"] == first["ticks_done"]


def test_a_journal_line_that_does_not_apply_is_a_clear_error(tmp_path):
    rng = random.Random(1)
    writer = CheckpointWriter(tmp_path)
    writer.write(town(rng, None))
    base = json.loads((tmp_path / "checkpoint.json").read_text())["base"]
    body = json.dumps({"base": base, "patch": {"d": {"ticks_done": {"+": [1]}}}}).encode()
    import zlib

    (tmp_path / JOURNAL).write_bytes(f"{zlib.crc32(body):08x} ".encode() + body + b"\n")
    with pytest.raises(CheckpointError, match=f"{JOURNAL}: line 1 does not apply"):
        read_checkpoint(tmp_path)


def test_after_a_failed_journal_write_the_next_checkpoint_is_whole(tmp_path, monkeypatch):
    import simulacra.checkpoint as module

    rng = random.Random(3)
    writer = CheckpointWriter(tmp_path)
    first = town(rng, None)
    writer.write(first)
    second = town(rng, first)

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(module.os, "fsync", full_disk)
        with pytest.raises(OSError):
            writer.write(second)
    third = town(rng, second)
    assert writer.write(third) is True  # whole: nothing is appended after what the failed write left
    assert {k: v for k, v in read_checkpoint(tmp_path).items() if k not in ("version", "base")} == third


def test_a_checkpoints_counters_are_reshaped_for_another_number_of_workers():
    """``reshape_layers``: the run's totals go on (added up in the first part), every part gets the rater's cached
    ratings of all, each part's replay starts where its own file's records of the checkpoint end; one process <->
    workers both ways, and the shape a checkpoint records."""
    from simulacra.checkpoint import checkpoint_shards, reshape_layers

    def part(calls, tokens, ratings, recorded):
        return {"llm": {"UsageMeter": {"_calls": calls, "_latency": 0.5 * calls}, "RetryingModel": {"retries": 1}},
                "mind_usage": {"plan": calls}, "rater": {"requests": calls, "ratings": ratings},
                "llm_calls": recorded, "mind_cache": {"hits": tokens, "misses": 0}}

    three = {"shards": [part(2, 10, {"a": 3}, 5), part(4, 20, {"b": 7}, 6), part(1, 5, {"a": 3, "c": 1}, 2)]}
    assert checkpoint_shards({"layers": three}) == 3 and checkpoint_shards({"layers": part(1, 1, {}, 0)}) == 0
    two = reshape_layers(three, 2, [5, 6])
    assert checkpoint_shards({"layers": two}) == 2
    first, second = two["shards"]
    assert first["llm"] == {"UsageMeter": {"_calls": 7, "_latency": 3.5}, "RetryingModel": {"retries": 3}}
    assert first["mind_usage"] == {"plan": 7} and first["mind_cache"] == {"hits": 35, "misses": 0}
    assert first["rater"] == {"requests": 7, "ratings": {"a": 3, "b": 7, "c": 1}}
    assert second == {"llm_calls": 6, "rater": {"ratings": {"a": 3, "b": 7, "c": 1}}}
    assert first["llm_calls"] == 5
    one = reshape_layers(three, 0, [0])
    assert "shards" not in one and one["llm"]["UsageMeter"]["_calls"] == 7 and one["llm_calls"] == 0
    back = reshape_layers(one, 3, [0, 0, 0])
    assert [p.get("rater", {}).get("requests", 0) for p in back["shards"]] == [7, 0, 0]
    with pytest.raises(ValueError, match="3 parts"):
        reshape_layers(one, 3, [0])
