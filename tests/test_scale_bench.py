"""The scale benchmark's town generator, its growth analysis, and a smoke run of ``bench.scale --quick``."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.memory_growth import growth_exponent, per_day
from bench.scale import CASE_SETTINGS, DAY, load_summary, parse_case, run_resuming, run_sampling_load, town
from simulacra.world.model import load_world

ROOT = Path(__file__).resolve().parent.parent


def test_town_of_100_is_a_valid_world_of_copies(tmp_path):
    world = load_world(town(tmp_path, 100))
    base = load_world(ROOT / "worlds" / "gullhaven.yaml")
    assert len(world.personas) == 100 and len(set(p.name for p in world.personas.values())) == 100
    originals = list(base.personas)
    assert list(world.personas)[:25] == originals
    homes = [pid for pid, p in base.places.items() if p.kind == "home"]
    for i, p in enumerate(world.personas.values()):
        k, j = divmod(i, 25)
        src = base.personas[originals[j]]
        assert p.occupation == src.occupation and p.name.split()[-1] == src.name.split()[-1]
        assert p.home == homes[(homes.index(src.home) + k) % len(homes)]
        # routine entries at home move with the home; the rest stay
        for a, b in zip(p.routine, src.routine):
            assert a.place == (p.home if b.place == src.home else b.place)
        # relationships stay inside the copy
        assert len(p.relationships) == len(src.relationships)
        assert all(list(world.personas).index(o) // 25 == k for o in p.relationships)
    # every home is used by someone in the 100-resident town
    assert {p.home for p in world.personas.values()} == set(homes)


def test_town_smaller_than_the_world_drops_missing_relationships(tmp_path):
    world = load_world(town(tmp_path, 5))
    assert len(world.personas) == 5
    for p in world.personas.values():
        assert set(p.relationships) <= set(world.personas)


def test_parse_case():
    assert parse_case("25x2") == (25, 2 * DAY)
    assert parse_case("100x1") == (100, DAY)
    assert parse_case("6x0.5h") == (6, 30)


def test_load_is_sampled_while_a_case_runs():
    out, err, code, loads = run_sampling_load([sys.executable, "-c", "import time; time.sleep(0.5); print('done')"],
                                              every_s=0.1)
    assert (out.strip(), code) == ("done", 0)
    assert len(loads) >= 3 and all(x >= 0 for x in loads)  # at the start, then every 0.1 s
    assert load_summary([1.0, 2.0, 4.5]) == {"min": 1.0, "mean": 2.5, "max": 4.5, "samples": 3}
    assert CASE_SETTINGS["100x1"] == ("embedding.exact=false",)  # the 100-resident day embeds batched


# a child that crashes (SIGSEGV, as chromadb's native code once did) until its marker file says it ran twice, and
# prints the arguments it was finally given
CRASHER = """
import os, signal, sys
marker = sys.argv[1]
n = int(open(marker).read()) if os.path.exists(marker) else 0
open(marker, "w").write(str(n + 1))
if n < int(sys.argv[2]):
    os.kill(os.getpid(), signal.SIGSEGV)
print(" ".join(sys.argv[3:]))
"""


def test_a_child_killed_by_a_signal_is_resumed_at_most_twice(tmp_path, capsys):
    """bench.recall's variants: a process that dies by a signal is run again with the resume arguments, each
    time said on stderr; the signals are returned beside the figures; a third crash, or an ordinary failure,
    is returned as it is."""
    def run(crashes: int, marker: str):
        cmd = [sys.executable, "-c", CRASHER, str(tmp_path / marker), str(crashes), "--one", "summary"]
        return run_resuming(cmd, ["--resume"], label="test")

    out, _, code, loads, signals = run(2, "a")
    assert (out.strip(), code, signals) == ("--one summary --resume", 0, [11, 11]) and len(loads) == 3
    assert capsys.readouterr().err.count("test: the process died by signal 11; resuming it") == 2
    out, _, code, _, signals = run(0, "b")
    assert (out.strip(), code, signals) == ("--one summary", 0, [])  # ran through: not resumed
    _, _, code, _, signals = run(3, "c")
    assert (code, signals) == (-11, [11, 11])  # the third death is the result
    _, _, code, _, signals = run_resuming([sys.executable, "-c", "raise SystemExit(3)"], ["--resume"])
    assert (code, signals) == (3, [])  # a failure that is not a signal is not retried


def _row(minute, short, long, perceived):
    return {"game_minute": minute, "short_term": {"mean": short, "max": short + 2},
            "long_term": {"mean": long, "max": 0},
            "total": {"mean": 50 + short + long, "max": 0}, "static": {"mean": 50, "max": 50}, "perceived": perceived}


def test_growth_exponent_and_per_day():
    start = 390
    rows = [_row(start + 60 * h, 10, 3 * math.sqrt(40 * h), 40 * h) for h in range(1, 60)]
    assert growth_exponent(rows) == pytest.approx(0.5, abs=1e-6)
    linear = [_row(start + 60 * h, 10, 0.2 * 40 * h, 40 * h) for h in range(1, 60)]
    assert growth_exponent(linear) == pytest.approx(1.0, abs=1e-6)
    assert growth_exponent(rows[:2]) is None
    days = per_day(rows, start)
    assert [d["days_run"] for d in days] == [1.0, 2.0, round(59 / 24, 3)]
    assert days[0]["perceived"] == 40 * 24 and days[0]["short_term_max"] == 12
    # the slope day by day: falling for sqrt growth, constant (0.2) for linear, 0 for none
    assert days[0]["marginal"] > days[1]["marginal"] > days[2]["marginal"] > 0
    assert days[1]["marginal"] == pytest.approx(3 * (math.sqrt(40 * 48) - math.sqrt(40 * 24)) / (40 * 24), abs=1e-4)
    assert [d["marginal"] for d in per_day(linear, start)] == [0.2, 0.2, 0.2]
    flat = [_row(start + 60 * h, 10, 7, 40 * h) for h in range(1, 60)]
    assert [d["marginal"] for d in per_day(flat, start)][1:] == [0.0, 0.0]


def test_quick_run_reports_every_figure(tmp_path):
    out = tmp_path / "scale.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.run([sys.executable, "-m", "bench.scale", "--quick", "--agents", "4", "--hours", "0.5",
                           "--sample", "10", "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text(encoding="utf-8"))
    r = data["cases"]["4x0.5h"]
    assert r["agents"] == 4 and r["ticks"] == r["ticks_planned"] == 3 and r["complete"] and r["stopped"] is None
    m = r["memories_per_agent"]
    assert m["static"]["min"] > 20  # persona and world facts
    assert m["total"]["mean"] == pytest.approx(m["static"]["mean"] + m["short_term"]["mean"] + m["long_term"]["mean"],
                                               abs=0.2)
    assert m["short_term"]["max"] >= 1  # three ticks of perception leave something in short-term memory
    assert r["store_bytes"] > 0 and r["trace_bytes"] > 0 and r["checkpoint_bytes"] > 0 and r["peak_rss_mb"] > 50
    # every text embedded is counted once: the statics of 4 agents and the world, and what the ticks added
    assert r["unique_texts"] == r["texts_embedded"] > 4 * m["static"]["min"] // 2
    assert r["floor_s"] == pytest.approx(r["unique_texts"] / r["throughput_texts_per_s"], rel=0.01)
    assert r["wall_over_floor"] == pytest.approx(r["wall_s"] / r["floor_s"], rel=0.01)
    assert r["wall_s"] == pytest.approx(r["setup_s"] + r["ticks_s"], abs=0.02)
    assert r["throughput_sample"] == 10 and r["embedding_exact"] is True
    assert r["embedding_backend"] == "onnx"  # the default backend, built as a run builds it (build_embedder)
    assert 0 < r["checkpoint_share"] < 1 and 0 < r["checkpoint_write_s_per_tick"] < r["checkpoint_s_per_tick"]
    # three ticks inside one period of memory.store_flush_minutes: each wrote memories to the store journal
    assert r["store_journal_s_per_tick"] > 0 and r["checkpoint_share"] < r["durability_share"] < 1
    # samples every game hour, and one at the run's end: here only the end, after tick 2 (half an hour in)
    assert [(g["tick"], g["game_minute"]) for g in r["growth"]] == [(2, 6 * 60 + 30 + 30)]
    assert r["growth"][0]["short_term"]["mean"] == m["short_term"]["mean"]
    assert r["settings"] == [] and r["load_avg_1min"]["samples"] >= 1
    assert "4x0.5h" in proc.stdout and "wall/floor" in proc.stdout
