"""End to end: a few agents for a few ticks on real Chroma stores, the real rater over HTTP, real embeddings."""

import json
import subprocess
import sys
from collections import defaultdict

import pytest

from simulacra.cli import format_summary
from simulacra.config import load_config
from simulacra.simulation import Simulation
from simulacra.trace import read_trace
from tests.conftest import DATA, ROOT, TELL_ALL

WELL_NEWS = "The old well's rope snaps"


def tiny_sim(tmp_path, rater_url, embedder, name="run", seed=0, extra=()):
    config = load_config(None, [f"rater.url={rater_url}", f"simulation.seed={seed}", TELL_ALL,
                                "simulation.conversation_probability=1.0", "simulation.news_min_rating=1",
                                *extra])
    return Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                             run_name=name, embedder=embedder)


def memory_counts_from_trace(ticks):
    """Replay add/move/forget operations into per-agent, per-tier id sets."""
    tiers = defaultdict(lambda: defaultdict(set))
    for t in ticks:
        for op in t["memory"]:
            if op["op"] == "add":
                tiers[op["agent"]][op["tier"]].add(op["id"])
            elif op["op"] == "move":
                tiers[op["agent"]][op["from"]].discard(op["id"])
                tiers[op["agent"]][op["to"]].add(op["id"])
            elif op["op"] == "forget":
                tiers[op["agent"]][op["tier"]].discard(op["id"])
    return tiers


def test_end_to_end_trace_memory_counts_and_news_passing(tmp_path, rater_url, embedder):
    with tiny_sim(tmp_path, rater_url, embedder) as sim:
        summary = sim.run(12)
        header, ticks = read_trace(sim.run_dir)
        # the trace: header then one record per tick, in order, with game time from the clock
        assert header["schema_version"] == 2 and header["agents"] == ["ann", "ben", "cal"]
        assert header["config"]["memory"]["a_rel"] == 1.0 and set(header["personas"]) == {"ann", "ben", "cal"}
        assert [t["tick"] for t in ticks] == list(range(12))
        assert [t["time"] for t in ticks] == [480 + 10 * i for i in range(12)]
        assert ticks[0]["clock"] == "08:00" and ticks[0]["events"][0].startswith(WELL_NEWS)
        # movement: Ann walks cottage -> well at tick 0, then one edge per tick to the shop
        assert [t["positions"]["ann"] for t in ticks[:4]] == ["well", "well", "shop", "shop"]
        assert ticks[2]["actions"]["ann"]["type"] == "move"
        # the trace's memory operations replay to exactly the stores' contents
        replayed = memory_counts_from_trace(ticks)
        for pid, mem in sim.memories.items():
            for tier in ("short_term", "long_term"):
                store = mem.tiers[tier]
                assert replayed[pid][tier] == {r.id for r in store.records}
                # Chroma holds the same ids (the run's town store: every agent's tier in one collection)
                held = store.collection.get(where={"owner": pid}, include=[])["ids"]
                assert sorted(held) == sorted(r.id for r in store.records)
            assert summary["agents"][pid]["counts"] == mem.counts()
        # retrievals record the three terms of every returned memory
        retrievals = [op for t in ticks for op in t["memory"] if op["op"] == "retrieve"]
        # one focus retrieval per awake agent and tick: Ann's last routine entry (09:30, at home) is her night, and
        # from 09:50, home again, she sleeps (simulacra.days)
        assert [t.get("asleep", []) for t in ticks] == [[]] * 11 + [["ann"]]
        assert len([r for r in retrievals if r["purpose"] == "focus"]) == 3 * 12 - 1
        # each under its purpose's profile: acting now (focus, reaction) with the seed's weights, recalling
        # (conversation, plan) led by relevance
        weights = {"situational": (0.25, 0.25, 1.0), "recall": (0.0, 0.1, 1.0)}
        assert {op["profile"] for op in retrievals} == {"situational", "recall"}
        for op in retrievals:
            assert op["profile"] == ("recall" if op["purpose"].split()[0] in ("conversation", "plan")
                                     else "situational")
            a_rec, a_imp, a_rel = weights[op["profile"]]
            for m in op["results"]:
                assert m["score"] >= 0.35 and m["tier"] in ("static", "short_term", "long_term")
                if m["tier"] != "static":
                    expected = a_rec * m["recency"] + a_imp * m["importance"] + a_rel * m["relevance"]
                    assert m["score"] == pytest.approx(expected, abs=1e-5)
        # news travels: Ann saw the well accident, told Ben at the shop, Ben told Cal in the field
        convs = [(t["tick"], c) for t in ticks for c in t["conversations"]]
        ann_ben = next((tk, c) for tk, c in convs if set(c["participants"]) == {"ann", "ben"})
        ben_cal = next((tk, c) for tk, c in convs if set(c["participants"]) == {"ben", "cal"})
        assert ann_ben[0] < ben_cal[0]
        assert any(ln["speaker"] == "ann" and WELL_NEWS in ln["text"] for ln in ann_ben[1]["lines"])
        assert any(ln["speaker"] == "ben" and "I heard from Ann Archer" in ln["text"] and WELL_NEWS in ln["text"]
                   for ln in ben_cal[1]["lines"])
        ev = summary["events"][0]
        assert ev["known_by"] == ["ann", "ben", "cal"]
        # both sides remember what was said
        line = next(ln for ln in ann_ben[1]["lines"] if WELL_NEWS in ln["text"])
        for pid in ("ann", "ben"):
            texts = [op["text"] for t in ticks for op in t["memory"] if op["op"] == "add" and op["agent"] == pid]
            assert any(line["text"] in x and x.startswith("Ann Archer said to Ben Brook") for x in texts)
        assert summary["agents"]["ben"]["talked_to"] == ["Ann Archer", "Cal Carter"]


def test_same_seed_same_trace(tmp_path, rater_url, embedder):
    paths = []
    for name in ("a", "b"):
        with tiny_sim(tmp_path, rater_url, embedder, name=name, seed=5,
                      extra=["simulation.conversation_probability=0.5"]) as sim:
            sim.run(8)
            paths.append(sim.run_dir / "trace.jsonl")
    assert paths[0].read_bytes() == paths[1].read_bytes()


def test_different_seeds_diverge(tmp_path, rater_url, embedder):
    traces = []
    for seed in range(4):
        with tiny_sim(tmp_path, rater_url, embedder, name=f"s{seed}", seed=seed,
                      extra=["simulation.conversation_probability=0.3", "simulation.acquaintance_bonus=0"]) as sim:
            sim.run(8)
            traces.append(json.dumps(read_trace(sim.run_dir)[1]))
    assert len(set(traces)) > 1


def test_existing_run_is_not_overwritten_by_accident(tmp_path, rater_url, embedder):
    from simulacra.errors import RunExistsError

    tiny_sim(tmp_path, rater_url, embedder, name="keep").close()
    with pytest.raises(RunExistsError, match="--overwrite") as raised:
        tiny_sim(tmp_path, rater_url, embedder, name="keep")
    # the message speaks to both users: the API's argument and method, the command line's flags
    message = str(raised.value)
    assert "overwrite (--overwrite)" in message and "run name (--run-name)" in message
    assert f"Town.resume({str(tmp_path / 'keep')!r})" in message and "simulacra run --resume" in message


def run_cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_run_sim_help_lists_the_options():
    out = run_cli("run_sim.py", "--help").stdout
    for opt in ("--world", "--hours", "--ticks", "--seed", "--run-name", "--db-dir", "--rater-url"):
        assert opt in out
    assert run_cli("-m", "simulacra.cli", "run", "--help").stdout.count("--rater-url") >= 1


def test_cli_run_prints_the_summary(tmp_path, rater_url):
    r = run_cli("run_sim.py", "--world", str(DATA / "tiny.yaml"), "--personas-dir", str(DATA / "personas"),
                "--ticks", "4", "--db-dir", str(tmp_path), "--run-name", "cli", "--rater-url", rater_url, "--quiet")
    assert r.returncode == 0, r.stderr
    assert "Ann Archer (ann): static" in r.stdout and f"trace:    {tmp_path / 'cli' / 'trace.jsonl'}" in r.stdout
    assert json.loads((tmp_path / "cli" / "summary.json").read_text())["ticks"] == 4


def test_cli_reports_bad_input_without_a_traceback(tmp_path):
    bad = tmp_path / "w.yaml"
    bad.write_text((DATA / "tiny.yaml").read_text().replace("[well, shop]", "[well, castle]"))
    r = run_cli("run_sim.py", "--world", str(bad), "--personas-dir", str(DATA / "personas"), "--ticks", "1",
                "--db-dir", str(tmp_path))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert f"{bad}: field 'paths.1.1': unknown place 'castle'" in r.stderr


def test_reflections_cite_remembered_evidence_and_public_news_reaches_the_shared_memory(tmp_path, rater_url,
                                                                                        embedder):
    world = tmp_path / "tiny_shared.yaml"
    text = (DATA / "tiny.yaml").read_text().replace("shared_memory: false", "shared_memory: true")
    world.write_text(text.replace("importance_hint: major", "importance_hint: major\n    public: true"))
    config = load_config(None, [f"rater.url={rater_url}", "simulation.conversation_probability=1.0",
                                "simulation.news_min_rating=1", "reflection.threshold=40"])
    with Simulation.create(world, config, personas_dir=DATA / "personas", db_dir=tmp_path, run_name="refl",
                           embedder=embedder) as sim:
        summary = sim.run(12)
        _, ticks = read_trace(sim.run_dir)
        known = defaultdict(set)  # agent -> ids it has remembered so far
        reflects = []
        for t in ticks:
            for op in t["memory"]:
                if op["op"] == "add":
                    known[op["agent"]].add(op["id"])
                elif op["op"] == "reflect":
                    reflects.append(op)
                    assert op["importance_accumulated"] >= 40
                    assert set(op["evidence"]) <= known[op["agent"]]  # evidence is what the agent remembered
                    for ins in op["insights"]:
                        assert ins["evidence_ids"] and set(ins["evidence_ids"]) <= set(op["evidence"])
                        assert ins["depth"] >= 1 and 1 <= ins["rating"] <= 10
        made = [op for op in reflects if op["insights"]]
        assert made, "no agent reflected"
        # each insight is a long-term memory of kind reflection, stored with its evidence and depth
        adds = {op["id"]: op for t in ticks for op in t["memory"] if op["op"] == "add" and op["tier"] == "long_term"}
        for op in made:
            for ins in op["insights"]:
                assert adds[ins["id"]]["kind"] == "reflection"
                stored = sim.memories[op["agent"]].long_term.get(ins["id"])
                if stored is not None:  # (unless forgotten since)
                    assert stored.evidence_ids == ins["evidence_ids"] and stored.depth == ins["depth"]
        for pid in sim.memories:
            assert summary["agents"][pid]["reflections_total"] == sum(op["agent"] == pid for op in made)
        # the public accident was posted once by the world; every agent reads it from the shared tier
        posts = [op for t in ticks for op in t["memory"] if op["op"] == "post"]
        assert posts[0]["author"] == "world" and posts[0]["text"].startswith(WELL_NEWS)
        assert len({p["text"] for p in posts}) == len(posts) == len(sim.shared) == summary["shared_memory"]
        q = embedder.embed([WELL_NEWS])[0]
        for mem in sim.memories.values():
            found = mem.retrieve(q, sim.clock.now, tiers=("shared",), threshold=0, query_text=WELL_NEWS)
            assert found[0].tier == "shared" and found[0].text.startswith(WELL_NEWS)


def test_a_trace_line_is_the_same_with_or_without_the_cleaning_walk(monkeypatch):
    """dumps writes a record of JSON values and numpy scalars directly, and one with NaN, infinities or mixed keys
    through _clean: the bytes are those of the walk either way."""
    import json

    import numpy as np

    import simulacra.trace as trace

    def walked(r):
        return json.dumps(trace._clean(r), sort_keys=True, ensure_ascii=False, separators=(",", ":"))

    plain = {"b": [1, 2.5, (3, "é")], "a": {"x": np.float32(0.1), "y": np.int64(7), "z": np.float64(1 / 3),
                                             "w": np.bool_(True), "n": None}}
    odd = {**plain, "nan": float("nan"), "inf": [np.float32("inf")], "mixed": {1: "a", "b": 2}}
    want = {id(r): walked(r) for r in (plain, odd)}
    walks = []
    clean = trace._clean
    monkeypatch.setattr(trace, "_clean", lambda v: walks.append(1) or clean(v))
    assert trace.dumps(plain) == want[id(plain)] and not walks  # written directly
    assert trace.dumps(odd) == want[id(odd)] and walks  # through the walk
    assert '"nan":null' in trace.dumps(odd) and '"inf":[null]' in trace.dumps(odd)


def test_the_summary_tells_who_still_remembers_each_event_from_who_came_to_know_it(tmp_path, rater_url, embedder):
    # nothing is promoted to long-term (importance is never above 1) and no nightly summary: a memory of the well
    # accident lasts until the consolidation after it is an hour old, so those who saw or heard of it early forget
    with tiny_sim(tmp_path, rater_url, embedder, extra=["memory.promote_threshold=1.0",
                                                         "memory.day_summary=false"]) as sim:
        summary = sim.run(18)
        _, ticks = read_trace(sim.run_dir)
    texts = {op["id"]: op["text"] for t in ticks for op in t["memory"] if op["op"] == "add"}
    replayed = memory_counts_from_trace(ticks)
    holding = sorted(pid for pid, tiers in replayed.items()
                     if any(WELL_NEWS in texts[i] for tier in ("short_term", "long_term") for i in tiers[tier]))
    forgot = [op for t in ticks for op in t["memory"] if op["op"] == "forget" and WELL_NEWS in op["text"]]
    ev = summary["events"][0]
    assert ev["text"].startswith(WELL_NEWS) and ev["known_by"] == ["ann", "ben", "cal"]
    assert forgot and ev["remembered_by"] == holding != ev["known_by"]
    assert set(ev["remembered_by"]) < set(ev["known_by"])
    printed = format_summary(summary)
    assert f"{ev['text']} -> known by 3, remembered by {len(holding)}" in printed
    # an interview of one who forgot lists what it once held about the question, and when and why it went
    from simulacra.interview import format_interview, interview

    who = next(pid for pid in ev["known_by"] if pid not in holding)
    asked = interview(sim.run_dir, who, "What happened at the old well?", embedder=embedder)
    gone = {op["id"]: (op, t["time"]) for t in ticks for op in t["memory"]
            if op["op"] == "forget" and op["agent"] == who}
    assert asked["forgotten"] and any(WELL_NEWS in m["text"] for m in asked["forgotten"])
    floor = sim.config.memory.for_profile(asked["profile"]).threshold  # fewer recalled than the answer has places
    assert len(asked["retrieved"]) < sim.config.cognition.memories_in_prompt
    held_texts = {texts[i] for tier in replayed[who].values() for i in tier}
    for m in asked["forgotten"]:
        op, time = gone[m["id"]]
        assert (m["text"], m["reason"], m["time"]) == (op["text"], op["reason"], time)
        assert m["text"] not in held_texts and m["relevance"] >= floor
    assert [m["relevance"] for m in asked["forgotten"]] == sorted((m["relevance"] for m in asked["forgotten"]),
                                                                  reverse=True)
    assert "once held and forgotten" in format_interview(asked)
    # the trace names the news each heard line's memory carries, so the viewer replays the same rule
    heard = [op for t in ticks for op in t["memory"] if op["op"] == "add" and op["kind"] == "dialogue"
             and any(ln["topic"] == ev["text"] and ln["listener"] == op["agent"] and op["id"] in ln["memory_ids"]
                     for c in t["conversations"] for ln in c["lines"])]
    assert all(op.get("topic") == ev["text"] for op in heard)
    tagged = [op for t in ticks for op in t["memory"] if op["op"] == "add" and op.get("topic") == ev["text"]]
    assert tagged and {op["agent"] for op in tagged} <= set(ev["known_by"])
    from simulacra.viewer.state import ReplayState

    replay = ReplayState.load(sim.run_dir)
    last = replay.last_tick
    assert sorted(replay.remembering_at(ev["text"], last)) == ev["remembered_by"]
    gone_at = replay.forgotten_at(ev["text"], last)
    assert sorted(gone_at) == sorted(set(ev["known_by"]) - set(holding))
    for pid, span in gone_at.items():  # the last of its memories of the accident went then, for that reason
        last_forget = max((t["tick"], op["reason"]) for t in ticks for op in t["memory"]
                          if op["op"] == "forget" and op["agent"] == pid and WELL_NEWS in op["text"])
        assert (span.end, span.reason) == last_forget
        assert pid in replay.remembering_at(ev["text"], span.end - 1)
    curve = replay.remembered(ev["text"])
    assert len(curve) == len(replay) and max(curve) == len(ev["known_by"]) and curve[-1] == len(holding)
    # read_frames' diffusion table counts the same, tick by tick
    from simulacra.frames import read_frames

    well = read_frames(sim.run_dir).diffusion.query("event == 0").sort_values("tick")
    assert well["remembered"].tolist() == curve[len(curve) - len(well):]
    assert well["rememberers"].iloc[-1] == ev["remembered_by"] and (well["remembered"] < well["known"]).any()
    assert all(n <= k for n, k in zip(curve, replay.diffusion(ev["text"]), strict=True))
    # the news panel says it and fades the markers of those who forgot
    import pygame

    from simulacra.viewer.layout import View
    from simulacra.viewer.render import KNOW_COLOURS, faded, render_tick

    surface, renderer = render_tick(replay, last, view=View(panel="news", news=ev["text"]))
    assert (f"known by 3 of {len(replay.agents)} at {replay.state_at(last).clock}, still remembered by "
            f"{len(holding)}") in renderer.panel_lines
    knowers = replay.knowers_at(ev["text"], last)
    for pid in ev["known_by"]:
        said = next(ln for ln in renderer.panel_lines if ln.startswith(replay.names[pid] + ":"))
        assert ("; forgot it at " in said) == (pid not in holding)
        if pid in renderer.markers:
            x, y = renderer.markers[pid]
            colour = KNOW_COLOURS[knowers[pid].how]
            want = faded(colour) if pid not in holding else colour
            from simulacra.viewer.layout import MARKER_RADIUS

            assert tuple(surface.get_at((x, y - MARKER_RADIUS + 2)))[:3] == want
    assert set(renderer.markers) & set(ev["known_by"]) - set(holding), "a marker of one who forgot was checked"
    pygame.font.quit()


def held(records, shared=None):
    """A stand-in for an agent's memory as :func:`simulacra.interview.forgotten` reads it: per tier, its records and
    their BM25 index (``shared``: the town board's, a readable tier too)."""
    from types import SimpleNamespace

    from simulacra.memory.lexical import LexicalIndex

    def tier(recs):
        index = LexicalIndex()
        index.append([r.text for r in recs])
        return SimpleNamespace(records=recs, lexical=index)

    tiers = {name: tier(recs) for name, recs in records.items()}
    readable = tuple(tiers) + (("shared",) if shared is not None else ())
    if shared is not None:
        tiers["shared"] = tier(shared)
    return SimpleNamespace(tiers={k: v for k, v in tiers.items() if k != "shared"}, readable=readable,
                           tier=tiers.__getitem__)


def test_forgotten_lists_what_no_memory_holds_any_more_above_the_floor_latest_forgetting_first(embedder):
    from types import SimpleNamespace

    from simulacra.interview import forgotten

    def forget(i, text, reason="consolidation: importance <= 0.5"):
        return {"op": "forget", "agent": "ann", "id": f"m{i}", "text": text, "tier": "short_term", "reason": reason}

    burn = "The blacksmith burned his arm at the forge."
    ticks = [{"time": 600, "memory": [forget(1, burn), forget(2, "The bread at the market was dear."),
                                      forget(3, "The forge fire is roaring.")]},
             {"time": 660, "memory": [forget(4, " the blacksmith burned his ARM at the forge.", "decayed"),
                                      {**forget(5, burn), "agent": "ben"}]}]
    holds = held({"short_term": [SimpleNamespace(text="The forge fire is roaring.")], "long_term": []})
    got = forgotten(ticks, "ann", holds, embedder, "Did the blacksmith get hurt at the forge?", 0.0, "l2")
    # the forge fire is still held; the burn once, at its latest forgetting; then the bread, least relevant
    assert [(m["id"], m["time"], m["reason"]) for m in got] == [("m4", 660.0, "decayed"),
                                                                 ("m2", 600.0, "consolidation: importance <= 0.5")]
    assert got[0]["relevance"] > got[1]["relevance"] > 1 / 3
    above = forgotten(ticks, "ann", holds, embedder, "Did the blacksmith get hurt at the forge?",
                      (got[0]["relevance"] + got[1]["relevance"]) / 2, "l2")
    assert [m["id"] for m in above] == ["m4"]


def test_forgotten_memories_are_measured_as_the_retrieval_measured_what_it_recalled(embedder):
    """Under hybrid relevance the floor (the recalled memories' least relevance, or the threshold) is a fused
    relevance; a forgotten memory's is fused too, its BM25 as if still held among the memories the agent reads
    (the retrieval's corpus: all its tiers). Compared by dense relevance alone, lunch small-talk was listed after a
    nonsense question that recalled nothing (audit of stop 51), and words the question shares lift a forgotten
    memory as they lift a held one."""
    from types import SimpleNamespace

    from simulacra.interview import forgotten
    from simulacra.memory.scoring import ScoringParams

    lunch = "Bram Ostrowski said to Kofi Mensah: \"I have been eating lunch at the tavern.\""
    ticks = [{"time": 600, "memory": [{"op": "forget", "agent": "bram", "id": "m1", "text": lunch,
                                       "tier": "short_term", "reason": "decayed"}]}]
    holds = held({"short_term": [], "long_term": [SimpleNamespace(text="Kofi Mensah is shoeing horses at the forge.",
                                                                   timestamp=500.0)]})
    nonsense = "What is the airspeed velocity of an unladen swallow?"
    dense = forgotten(ticks, "bram", holds, embedder, nonsense, 0.0, "l2")[0]["relevance"]
    floor = dense - 0.01  # the old comparison listed it
    assert [m["id"] for m in forgotten(ticks, "bram", holds, embedder, nonsense, floor, "l2")] == ["m1"]
    hybrid = ScoringParams(relevance="hybrid", hybrid_weight=0.25)
    assert forgotten(ticks, "bram", holds, embedder, nonsense, floor, "l2", params=hybrid, query_text=nonsense) == []
    asked = "Who ate lunch at the tavern?"  # shares its words: fused relevance above the dense one
    fused = forgotten(ticks, "bram", holds, embedder, asked, 0.0, "l2", params=hybrid, query_text=asked)[0]
    plain = forgotten(ticks, "bram", holds, embedder, asked, 0.0, "l2")[0]
    assert fused["relevance"] == pytest.approx(0.75 * plain["relevance"] + 0.25 * 1.0)
    # a better match held in another tier (the shared board here) is the corpus's best: the forgotten line's BM25
    # is measured against it, as the retrieval measured the recalled memories
    board = held({"short_term": [], "long_term": []}, shared=[SimpleNamespace(text="Kofi ate lunch at the tavern.")])
    lower = forgotten(ticks, "bram", board, embedder, asked, 0.0, "l2", params=hybrid, query_text=asked)[0]
    assert 0.75 * plain["relevance"] < lower["relevance"] < fused["relevance"]
    # RRF ranks and min-max ranges are the whole tier's: there both sides stay dense, the floor too
    from simulacra.interview import fuses_forgotten

    for other in (ScoringParams(relevance="hybrid", fusion="rrf"), ScoringParams(relevance="hybrid",
                  normalize="minmax"), ScoringParams(relevance="dense"), None):
        assert not fuses_forgotten(other)
        assert forgotten(ticks, "bram", holds, embedder, asked, 0.0, "l2", params=other, query_text=asked) == [plain]
    assert fuses_forgotten(hybrid) and fuses_forgotten(ScoringParams(relevance="lexical"))


def test_an_interview_at_an_earlier_tick_lists_what_was_held_then_and_forgotten_since(embedder):
    from types import SimpleNamespace

    from simulacra.interview import forgotten

    burn, socks = "The blacksmith burned his arm at the forge.", "Ann is mending socks by the fire."

    def op(kind, i, text):
        return {"op": kind, "agent": "ann", "id": f"m{i}", "text": text, "tier": "short_term", "reason": "decayed"}

    ticks = [{"time": 600, "memory": [op("add", 1, burn)]}]
    later = [{"time": 660, "memory": [op("add", 2, socks)]},
             {"time": 720, "memory": [op("forget", 1, burn), op("forget", 2, socks)]}]
    # a memory of the same text formed after the question's time does not count as held at that time
    holds = SimpleNamespace(tiers={"short_term": SimpleNamespace(records=[SimpleNamespace(text=burn, timestamp=700.0)]),
                                   "long_term": SimpleNamespace(records=[])})
    got = forgotten(ticks, "ann", holds, embedder, "Did the blacksmith get hurt?", 0.0, "l2", now=610, later=later)
    assert [(m["id"], m["time"], m["later"]) for m in got] == [("m1", 720.0, True)]  # not the socks: formed later
    assert forgotten(ticks, "ann", holds, embedder, "Did the blacksmith get hurt?", 0.0, "l2", later=later) == []


def test_a_topic_is_held_by_a_memory_tagged_with_it_or_holding_its_text_in_short_or_long_term():
    from types import SimpleNamespace

    from simulacra.shard import held_topics

    storm, dog = "A storm is coming tonight", "Ruth's dog is lost"

    def rec(text, **extra):
        return SimpleNamespace(text=text, extra=extra)

    def mem(short=(), long=()):
        return SimpleNamespace(short_term=SimpleNamespace(records=list(short)),
                               long_term=SimpleNamespace(records=list(long)))

    rt = SimpleNamespace(memories={
        "ann": mem(short=[rec("Did you know the sky looks bad?", topic=storm)]),  # a model's paraphrase, tagged
        "ben": mem(long=[rec(f"Ben's day 1: saw: {storm}; heard from Ann: {dog}")]),  # the night's summary
        "cal": mem(short=[rec("Cal is mending a fence.")]),
        "dan": mem()})
    assert held_topics(rt, ["ann", "ben", "cal", "dan"], [storm, dog]) == {"ann": [0], "ben": [0, 1]}
